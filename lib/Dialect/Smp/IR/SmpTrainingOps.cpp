//===- SmpTrainingOps.cpp - Backward and optimizer ops --------------------===//

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;
using namespace smp;

static RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// A norm gradient's result types: the input's (which the incoming grad
/// must have), then the scale's own type for each of its `numParams`
/// parameter gradients (scale, and bias).
template <typename Adaptor>
static LogicalResult inferNormGradTypes(std::optional<Location> loc,
                                        StringRef opName, Adaptor adaptor,
                                        unsigned numParams,
                                        SmallVectorImpl<Type> &results) {
  auto x = rankedType(adaptor.getInput());
  if (rankedType(adaptor.getGrad()) != x)
    return emitOptionalError(loc, "'", opName, "' grad ",
                             adaptor.getGrad().getType(),
                             " does not match input ", x);
  if (Value residual = adaptor.getResidual();
      residual && rankedType(residual) != x)
    return emitOptionalError(loc, "'", opName, "' residual ",
                             residual.getType(), " does not match input ", x);
  results.push_back(x);
  results.append(numParams, rankedType(adaptor.getScale()));
  return success();
}

//===----------------------------------------------------------------------===//
// adam_update, sgd_update: a gradient of the parameter's type, or f16/bf16
// for f32
//===----------------------------------------------------------------------===//

/// An optimizer step's gradient: the parameter's type, or its shape in
/// f16/bf16 for an f32 parameter.
static LogicalResult verifyGradType(Operation *op, Value paramValue,
                                    Value gradValue) {
  auto param = cast<RankedTensorType>(paramValue.getType());
  auto grad = cast<RankedTensorType>(gradValue.getType());
  if (grad == param)
    return success();
  if (grad.getShape() != param.getShape())
    return op->emitOpError("gradient ")
           << grad << " does not have the shape of the parameter " << param;
  Type g = grad.getElementType();
  if (!param.getElementType().isF32() || !(g.isF16() || g.isBF16()))
    return op->emitOpError("gradient ")
           << grad << " must have the parameter's type " << param
           << " (or f16/bf16 for an f32 parameter)";
  return success();
}

LogicalResult AdamUpdateOp::verify() {
  return verifyGradType(*this, getParam(), getGrad());
}

/// A multi-tensor update's groups: `n` > 0 parameters, each group of
/// `groups` (the gradients first, then the states and results) one per
/// parameter, each state and result of its parameter's type, each gradient
/// as verifyGradType says.
static LogicalResult verifyMultiUpdate(Operation *op, ValueRange params,
                                       ArrayRef<ValueRange> groups,
                                       StringRef groupNames) {
  size_t n = params.size();
  if (n == 0)
    return op->emitOpError("needs at least one parameter");
  for (ValueRange group : groups)
    if (group.size() != n)
      return op->emitOpError("has ")
             << n << " parameters but a group of " << group.size() << " ("
             << groupNames << " take one per parameter)";
  for (size_t i = 0; i < n; ++i) {
    Type t = params[i].getType();
    for (ValueRange group : groups.drop_front())
      if (group[i].getType() != t)
        return op->emitOpError("parameter #")
               << i << " is " << t << " but its state or result is "
               << group[i].getType();
    if (failed(verifyGradType(op, params[i], groups.front()[i])))
      return failure();
  }
  return success();
}

LogicalResult AdamUpdateMultiOp::verify() {
  return verifyMultiUpdate(
      *this, getParams(),
      {getGrads(), getExpAvgs(), getExpAvgSqs(), getNewParams(),
       getNewExpAvgs(), getNewExpAvgSqs()},
      "grads, exp_avgs, exp_avg_sqs and the three results");
}

LogicalResult SgdUpdateMultiOp::verify() {
  return verifyMultiUpdate(*this, getParams(),
                           {getGrads(), getMomentumBuffers(), getNewParams(),
                            getNewMomentumBuffers()},
                           "grads, momentum_buffers and the two results");
}

LogicalResult SgdUpdateOp::verify() {
  return verifyGradType(*this, getParam(), getGrad());
}

LogicalResult BiasGeluGradOp::verify() {
  auto x = rankedType(getInput());
  auto bias = rankedType(getBiasGrad());
  if (x.getRank() < 1)
    return emitOpError("needs an input of rank 1 or more");
  if (bias.getElementType() != x.getElementType())
    return emitOpError("bias_grad element type ")
           << bias.getElementType() << " is not the input's "
           << x.getElementType();
  int64_t n = x.getShape().back();
  ArrayRef<int64_t> shape = bias.getShape();
  bool ok = !shape.empty() && shape.back() == n &&
            (shape.size() == 1 ||
             (static_cast<int64_t>(shape.size()) == x.getRank() &&
              llvm::all_of(shape.drop_back(),
                           [](int64_t d) { return d == 1; })));
  if (!ok)
    return emitOpError("bias_grad ")
           << bias << " is neither [" << n << "] nor [1, ..., 1, " << n
           << "] for input " << x;
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, LayerNormGradOp::Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  if (failed(inferNormGradTypes(loc, "smp.layer_norm_grad", adaptor, 2,
                                results)))
    return failure();
  int64_t rank = rankedType(adaptor.getInput()).getRank();
  if (!normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), rank))
    return emitOptionalError(loc, "'smp.layer_norm_grad' axis out of range");
  return success();
}

LogicalResult RmsNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, RmsNormGradOp::Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  return inferNormGradTypes(loc, "smp.rms_norm_grad", adaptor, 1, results);
}

SmallVector<std::pair<unsigned, Value>> smp::inPlaceOperands(Operation *op) {
  SmallVector<std::pair<unsigned, Value>> pairs;
  if (auto reduce = dyn_cast<mlir::shard::AllReduceOp>(op)) {
    if (reduce.getInput().getType() == reduce.getResult().getType())
      pairs.push_back({0, reduce.getInput()});
    return pairs;
  }
  if (auto sgd = dyn_cast<SgdUpdateOp>(op)) {
    pairs.push_back({1, sgd.getMomentumBuffer()});
    return pairs;
  }
  if (auto sgd = dyn_cast<SgdUpdateMultiOp>(op)) {
    unsigned first = sgd.getNewParams().size();
    for (auto [k, buffer] : llvm::enumerate(sgd.getMomentumBuffers()))
      if (first + k < op->getNumResults() &&
          buffer.getType() == op->getResult(first + k).getType())
        pairs.push_back({static_cast<unsigned>(first + k), buffer});
    return pairs;
  }
  if (auto sum = dyn_cast<AddMultiOp>(op)) {
    // A sum over its f32 first operand (the accumulated gradient), else
    // over an f32 second one.
    for (auto [i, out] : llvm::enumerate(sum.getResults()))
      for (Value in : {sum.getLhs(i), sum.getRhs(i)})
        if (in.getType() == out.getType()) {
          pairs.push_back({static_cast<unsigned>(i), in});
          break;
        }
    return pairs;
  }
  Value logits;
  unsigned index = 0;
  if (auto grad = dyn_cast<CrossEntropyGradOp>(op))
    logits = grad.getLogits();
  else if (auto grad = dyn_cast<CrossEntropyShardGradOp>(op))
    logits = grad.getLogits();
  else if (auto fused = dyn_cast<CrossEntropyWithGradOp>(op))
    logits = fused.getLogits(), index = 1;
  if (!logits || logits.getType() != op->getResult(index).getType())
    return pairs;
  bool lossOnly = llvm::all_of(logits.getUsers(), [](Operation *user) {
    return isa<CrossEntropyOp, CrossEntropyGradOp, CrossEntropyShardOp,
               CrossEntropyShardGradOp, CrossEntropyWithGradOp>(user);
  });
  if (lossOnly)
    pairs.push_back({index, logits});
  return pairs;
}

/// cross_entropy_shard(_grad)'s operands: labels of the logits' shape
/// without its last dim, a one-element integer offset, at least one class;
/// the statistics' type (labels' shape + [2], f32 or f64 for f64 logits).
static FailureOr<RankedTensorType>
crossEntropyShardStats(std::optional<Location> loc, const char *name,
                       Value logitsValue, Value labelsValue, Value offsetValue,
                       int64_t classes) {
  auto logits = rankedType(logitsValue);
  auto labels = rankedType(labelsValue);
  auto offset = rankedType(offsetValue);
  if (logits.getRank() < 1 ||
      logits.getShape().drop_back() != labels.getShape()) {
    (void)emitOptionalError(loc, name, " labels ", labels,
                            " do not match logits ", logits);
    return failure();
  }
  if (offset.getNumElements() != 1) {
    (void)emitOptionalError(loc, name, " offset must have one element, not ",
                            offset);
    return failure();
  }
  if (classes < 1) {
    (void)emitOptionalError(loc, name, " classes must be at least 1, not ",
                            classes);
    return failure();
  }
  SmallVector<int64_t> shape(labels.getShape());
  shape.push_back(2);
  Type e = logits.getElementType();
  Type f32 = Float32Type::get(logits.getContext());
  return RankedTensorType::get(shape, isa<Float64Type>(e) ? e : f32);
}

LogicalResult CrossEntropyShardOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc,
    CrossEntropyShardOp::Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto stats = crossEntropyShardStats(
      loc, "'smp.cross_entropy_shard'", adaptor.getLogits(),
      adaptor.getLabels(), adaptor.getOffset(), adaptor.getClasses());
  if (failed(stats))
    return failure();
  results.push_back(*stats);
  return success();
}

LogicalResult LabelRankOp::inferReturnTypes(MLIRContext *ctx,
                                            std::optional<Location> loc,
                                            LabelRankOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  const char *name = "'smp.label_rank'";
  if (failed(crossEntropyShardStats(loc, name, adaptor.getLogits(),
                                    adaptor.getLabels(), adaptor.getOffset(),
                                    adaptor.getClasses())))
    return failure();
  auto labels = rankedType(adaptor.getLabels());
  if (Value target = adaptor.getTarget();
      target && rankedType(target).getShape() != labels.getShape())
    return emitOptionalError(loc, name, " target ", rankedType(target),
                             " does not match labels ", labels);
  results.push_back(labels.clone(Float32Type::get(ctx)));
  return success();
}

LogicalResult CrossEntropyShardGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc,
    CrossEntropyShardGradOp::Adaptor adaptor, SmallVectorImpl<Type> &results) {
  const char *name = "'smp.cross_entropy_shard_grad'";
  auto stats = crossEntropyShardStats(loc, name, adaptor.getLogits(),
                                      adaptor.getLabels(), adaptor.getOffset(),
                                      adaptor.getClasses());
  if (failed(stats))
    return failure();
  for (Value v : {adaptor.getStats(), adaptor.getGrad()})
    if (rankedType(v) != *stats)
      return emitOptionalError(loc, name,
                               " statistics and their gradient "
                               "must be ",
                               *stats, ", not ", rankedType(v));
  results.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc,
    CrossEntropyGradOp::Adaptor adaptor, SmallVectorImpl<Type> &results) {
  auto logits = rankedType(adaptor.getLogits());
  auto labels = rankedType(adaptor.getLabels());
  auto grad = rankedType(adaptor.getGrad());
  if (logits.getRank() < 1 ||
      logits.getShape().drop_back() != labels.getShape())
    return emitOptionalError(loc, "'smp.cross_entropy_grad' labels ", labels,
                             " do not match logits ", logits);
  int64_t classes;
  if (failed(crossEntropyClasses(loc, "'smp.cross_entropy_grad'", logits,
                                 adaptor.getClasses(), classes)))
    return failure();
  bool none = adaptor.getReduction() == Reduction::none;
  if ((none && grad.getShape() != labels.getShape()) ||
      (!none && grad.getNumElements() != 1))
    return emitOptionalError(loc, "'smp.cross_entropy_grad' incoming grad ",
                             grad, " does not match the loss");
  results.push_back(logits);
  return success();
}

LogicalResult SliceGradOp::verify() {
  auto in = getType();
  int64_t rank = in.getRank();
  ArrayRef<int64_t> starts = getStarts(), limits = getLimits(),
                    steps = getSteps();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(limits.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank)
    return emitOpError("needs one start, limit and step per dimension");
  for (int64_t d = 0; d < rank; ++d)
    if (steps[d] == 0 ||
        sliceLength(starts[d], limits[d], steps[d]) !=
            getGrad().getType().getDimSize(d))
      return emitOpError("grad ") << getGrad().getType()
                                  << " does not match the slice of " << in;
  return success();
}

/// The operands cross_entropy and cross_entropy_grad would take, the loss
/// of cross_entropy's type (f32 for f16/bf16 logits as well) and the
/// gradient of the logits' type.
LogicalResult CrossEntropyWithGradOp::verify() {
  auto logits = rankedType(getLogits()), labels = rankedType(getLabels());
  if (logits.getRank() < 1 ||
      logits.getShape().drop_back() != labels.getShape())
    return emitOpError("labels ")
           << labels << " do not match logits " << logits;
  int64_t classes;
  if (failed(crossEntropyClasses(getLoc(), "'smp.cross_entropy_with_grad'",
                                 logits, getClasses(), classes)))
    return failure();
  Type e = logits.getElementType();
  if (Value weights = getWeights()) {
    auto w = rankedType(weights);
    if (w.getRank() != 1 || w.getDimSize(0) != classes ||
        w.getElementType() != e)
      return emitOpError("weights ") << w << " must be a vector of the "
                                     << classes << " classes of " << logits;
  }
  bool none = getReduction() == Reduction::none;
  auto grad = rankedType(getGrad());
  if ((none && grad.getShape() != labels.getShape()) ||
      (!none && grad.getNumElements() != 1))
    return emitOpError("incoming grad ") << grad << " does not match the loss";
  auto loss = rankedType(getLoss());
  ArrayRef<int64_t> lossShape = none ? labels.getShape() : ArrayRef<int64_t>{};
  Type f32 = Float32Type::get(getContext());
  bool lossType = loss.getElementType() == e ||
                  (loss.getElementType() == f32 && (e.isF16() || e.isBF16()));
  if (loss.getShape() != lossShape || !lossType)
    return emitOpError("loss ") << loss << " is not the loss of " << logits;
  if (getLogitsGrad().getType() != logits)
    return emitOpError("logits' gradient ")
           << getLogitsGrad().getType() << " must be " << logits;
  return success();
}
