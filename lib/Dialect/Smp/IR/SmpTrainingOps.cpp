//===- SmpTrainingOps.cpp - Backward and optimizer ops --------------------===//

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;
using namespace smp;

static RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// The shape a norm's scale/bias gradient takes: the scale's own type.
LogicalResult LayerNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, LayerNormGradOp::Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto x = rankedType(adaptor.getInput());
  if (rankedType(adaptor.getGrad()) != x)
    return emitOptionalError(loc, "'smp.layer_norm_grad' grad ",
                             adaptor.getGrad().getType(),
                             " does not match input ", x);
  if (!normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), x.getRank()))
    return emitOptionalError(loc, "'smp.layer_norm_grad' axis out of range");
  auto scale = rankedType(adaptor.getScale());
  results.push_back(x);
  results.push_back(scale);
  results.push_back(scale);
  return success();
}

LogicalResult RmsNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, RmsNormGradOp::Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto x = rankedType(adaptor.getInput());
  if (rankedType(adaptor.getGrad()) != x)
    return emitOptionalError(loc, "'smp.rms_norm_grad' grad ",
                             adaptor.getGrad().getType(),
                             " does not match input ", x);
  results.push_back(x);
  results.push_back(rankedType(adaptor.getScale()));
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
  bool none = adaptor.getReduction() == Reduction::none;
  if ((none && grad.getShape() != labels.getShape()) ||
      (!none && grad.getNumElements() != 1))
    return emitOptionalError(loc, "'smp.cross_entropy_grad' incoming grad ",
                             grad, " does not match the loss");
  results.push_back(logits);
  return success();
}

LogicalResult GatherGradOp::verify() {
  auto data = getType();
  auto indices = getIndices().getType();
  auto axis = normalizeAxis(static_cast<int64_t>(getAxis()), data.getRank());
  if (!axis)
    return emitOpError("axis out of range for ") << data;
  SmallVector<int64_t> expected(data.getShape().take_front(*axis));
  llvm::append_range(expected, indices.getShape());
  llvm::append_range(expected, data.getShape().drop_front(*axis + 1));
  if (getGrad().getType().getShape() != ArrayRef<int64_t>(expected) ||
      getGrad().getType().getElementType() != data.getElementType())
    return emitOpError("grad ") << getGrad().getType()
                                << " is not the gather result of " << data;
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
