//===- LossShare.cpp - A model's own loss split over batch shards ---------===//
//
// See LossShare.h. A shard's share s_k of the one-device loss L (sum over
// the shards k of s_k = L, and likewise their gradients) by the loss's form:
//
//   sum over the batch (ReduceSum, cross-entropy sum)   s_k = the shard's own
//   mean over the batch (ReduceMean)                     s_k = own / shards
//   ratio of two sums A / D (cross-entropy mean: the
//     losses over the weights of the labels counted)     s_k = A_k / sum_k D_k
//   a term that does not depend on the batch             s_k = term / shards
//   a + b, -a, a * c, a / c (c not from the batch)       from the parts'
//
// The denominator of a ratio is summed over every shard: an all-reduce over
// the dp ranks of the sum over the step's micro-batches, for which the ops
// computing D from this micro-batch's slices of the inputs are cloned once
// per micro-batch, built once for the step (a denominator that reads a
// parameter is refused: its gradient would need every shard's numerator).
//
// A constant folded from the batch's shape (sum / x.size(0)) holds the
// shard's batch, not the whole one: markBatchScaledLossConstants finds those
// (two imports at different batch sizes) and the share scales them back.
//
//===----------------------------------------------------------------------===//

#include "smp/Dialect/Smp/Transforms/LossShare.h"

#include "TrainStepContract.h"
#include "TrainStepUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <functional>
#include <optional>

using namespace mlir;

namespace smp {
namespace {

constexpr llvm::StringLiteral kBatchScaledAttr = SmpDialect::kBatchScaledAttr;

/// The value of a one-element constant.
std::optional<double> scalarConstant(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || attr.getNumElements() != 1)
    return std::nullopt;
  Type elt = attr.getElementType();
  if (isa<FloatType>(elt))
    return (*attr.getValues<APFloat>().begin()).convertToDouble();
  if (elt.isInteger(1))
    return std::nullopt;
  if (isa<IntegerType>(elt))
    return static_cast<double>(
        (*attr.getValues<APInt>().begin()).getSExtValue());
  return std::nullopt;
}

bool isScalar(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements() == 1;
}

/// Whether reduction `r` (sum or mean) reduces its input to one value over
/// every dim.
template <typename ReduceOpT> bool reducesAll(ReduceOpT r) {
  return isScalar(r.getResult()) &&
         static_cast<int64_t>(r.getAxes().size()) ==
             cast<RankedTensorType>(r.getInput().getType()).getRank();
}

/// The ops whose operands the loss's form is read through.
bool isLossArithmetic(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, NegOp, CastOp, ReshapeOp>(op);
}

/// `v` as an integer when it is one, else in %g form.
std::string number(double v) {
  if (v == std::floor(v) && std::abs(v) < 1e15)
    return std::to_string(static_cast<int64_t>(v));
  return llvm::formatv("{0:g}", v).str();
}

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-6 * std::max(std::abs(a), std::abs(b));
}

LogicalResult compareLossConstants(Value v, Value w, StringRef name,
                                   int64_t factor) {
  Operation *op = v.getDefiningOp(), *probe = w.getDefiningOp();
  if (!op || !isLossArithmetic(op))
    return success();
  if (!probe || op->getName() != probe->getName() ||
      op->getNumOperands() != probe->getNumOperands()) {
    // The two imports differ in form here: this arithmetic's constants
    // cannot be compared, so none of them may be taken for a literal.
    if (auto module = op->getParentOfType<ModuleOp>())
      module->setAttr(SmpDialect::kBatchScalingUnknownAttr,
                      UnitAttr::get(op->getContext()));
    return success();
  }
  bool scaling = isa<MulOp, DivOp>(op);
  const char *verb = isa<MulOp>(op)   ? "multiplies by"
                     : isa<DivOp>(op) ? "divides by"
                     : isa<SubOp>(op) ? "subtracts"
                                      : "adds";
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    auto c = scalarConstant(op->getOperand(i));
    auto d = scalarConstant(probe->getOperand(i));
    if (!c && !d) {
      if (failed(compareLossConstants(op->getOperand(i), probe->getOperand(i),
                                      name, factor)))
        return failure();
      continue;
    }
    if (c && d && *c == *d)
      continue;
    if (c && d && scaling && close(*d, *c * factor)) {
      op->setAttr(kBatchScaledAttr,
                  IntegerAttr::get(IntegerType::get(op->getContext(), 64), 1));
      continue;
    }
    if (c && d && scaling && close(*d * factor, *c)) {
      op->setAttr(kBatchScaledAttr,
                  IntegerAttr::get(IntegerType::get(op->getContext(), 64), -1));
      continue;
    }
    auto diag = op->emitError() << "the loss output '" << name << "' " << verb
                                << " a value folded from the batch's shape";
    if (c && d)
      diag << " (" << number(*c) << " at this batch, " << number(*d) << " at "
           << factor << " times it)";
    if (scaling)
      diag << " that is not proportional to the batch size";
    return diag << "; smp cannot split such a loss over data-parallel ranks "
                   "or micro-batches: normalise by the batch size (a mean) "
                   "or not at all (a sum), or compile with one replica and "
                   "one micro-batch";
  }
  return success();
}

/// Builds the shares (see the file comment).
class ShareBuilder {
public:
  ShareBuilder(OpBuilder &b, StringRef name, int64_t dp, int64_t microbatches,
               SmallVectorImpl<Value> &stepSums)
      : b(b), name(name), dp(dp), m(microbatches), stepSums(stepSums) {}

  FailureOr<Value> share(Value v);

private:
  OpBuilder &b;
  StringRef name;
  int64_t dp, m;
  /// The step's denominators, the k-th built by the first call's k-th
  /// overShards (see buildLossShare); `nextSum` counts this call's.
  SmallVectorImpl<Value> &stepSums;
  size_t nextSum = 0;
  llvm::DenseMap<Value, bool> fromBatch, fromParams;

  double shards() const { return static_cast<double>(dp * m); }
  Value f32(Location loc, Value v) { return scalarF32Loss(b, loc, v); }
  Value constant(Location loc, double v) {
    return scalarConst(b, loc, b.getF32Type(), v);
  }

  bool isFromBatch(Value v) {
    return dependsOnArgument(v, fromBatch, isBatchInput);
  }
  bool isFromParams(Value v) {
    return dependsOnArgument(v, fromParams, [](func::FuncOp f, unsigned i) {
      return static_cast<bool>(f.getArgAttr(i, SmpDialect::kParamAttr));
    });
  }

  /// The input holding every micro-batch when `op` takes one micro-batch's
  /// slice of it (the unrolled step's slice of an input along dim 0).
  BlockArgument microbatchSliceOf(Operation *op) {
    auto slice = dyn_cast<SliceOp>(op);
    auto arg = slice ? dyn_cast<BlockArgument>(slice.getInput()) : nullptr;
    auto f =
        arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
    if (!f || !f.getArgAttr(arg.getArgNumber(), SmpDialect::kInputAttr))
      return nullptr;
    auto whole = cast<RankedTensorType>(arg.getType());
    auto part = cast<RankedTensorType>(slice.getType());
    if (whole.getRank() == 0 ||
        whole.getShape().drop_front() != part.getShape().drop_front() ||
        whole.getDimSize(0) != part.getDimSize(0) * m)
      return nullptr;
    return arg;
  }

  /// The sum over the step's micro-batches of `v`, which this micro-batch
  /// computes from its slices of the inputs, parameters and constants: the
  /// ops between the slices and `v`, cloned once per micro-batch on that
  /// micro-batch's slices.
  Value overMicrobatches(Value v, Location loc) {
    // The ops from the slices to `v`, in order (post-order of a DFS).
    SmallVector<Operation *> ops;
    llvm::DenseMap<Operation *, bool> fromSlices; // op -> reads a slice
    std::function<bool(Value)> visit = [&](Value x) -> bool {
      Operation *op = x.getDefiningOp();
      if (!op)
        return false; // a parameter: the same for every micro-batch
      if (auto it = fromSlices.find(op); it != fromSlices.end())
        return it->second;
      bool reads = static_cast<bool>(microbatchSliceOf(op));
      if (!reads)
        for (Value in : op->getOperands())
          reads |= visit(in);
      fromSlices[op] = reads;
      if (reads)
        ops.push_back(op);
      return reads;
    };
    visit(v);
    Value total;
    for (int64_t j = 0; j < m; ++j) {
      IRMapping map;
      for (Operation *op : ops) {
        if (BlockArgument whole = microbatchSliceOf(op)) {
          map.map(op->getResult(0), sliceMicrobatch(b, loc, whole, j, m));
          continue;
        }
        b.clone(*op, map);
      }
      Value part = f32(loc, map.lookupOrDefault(v));
      total = total ? Value(AddOp::create(b, loc, total, part)) : part;
    }
    return total;
  }

  /// The sum over every shard of `v`, a value this shard computes from its
  /// samples (its inputs' slices): over the micro-batches, then the dp
  /// ranks; built at the first micro-batch, the same value after.
  Value overShards(Value v, Location loc) {
    if (nextSum < stepSums.size())
      return stepSums[nextSum++];
    Value total = m > 1 ? overMicrobatches(v, loc) : f32(loc, v);
    if (dp > 1)
      total = allReduceDp(b, loc, total);
    stepSums.push_back(total);
    ++nextSum;
    return total;
  }

  /// A sum over the batch: each shard's own value is its share.
  bool isSum(Value v);
  /// The one-device value of a constant `c` of `op` (scaled back to the
  /// whole batch when it was folded from the shard's shape).
  FailureOr<Value> wholeBatchConstant(Operation *op, Value c);
  FailureOr<Value> crossEntropyMean(CrossEntropyOp ce);
  FailureOr<Value> ratio(Operation *op, Value num, Value den);
  FailureOr<Value> refuse(Operation *op, const Twine &why);
};

FailureOr<Value> ShareBuilder::refuse(Operation *op, const Twine &why) {
  op->emitError()
      << "cannot split the loss output '" << name << "' over " << dp
      << " data-parallel rank(s) x " << m << " micro-batch(es): " << why
      << ". smp splits a loss that is a sum or a mean over the batch's "
         "samples (ReduceSum, ReduceMean, a cross-entropy), a ratio of two "
         "such sums (a denominator from the inputs), terms without the "
         "batch, and sums "
         "and constant scalings of those; compile with one replica and "
         "one micro-batch, or train an output with --loss "
         "cross_entropy:LOGITS:LABELS or mse:OUTPUT:TARGET";
  return failure();
}

bool ShareBuilder::isSum(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || !isFromBatch(v))
    return false;
  if (auto ce = dyn_cast<CrossEntropyOp>(op))
    return ce.getReduction() == Reduction::sum;
  if (auto r = dyn_cast<ReduceSumOp>(op))
    return reducesAll(r);
  if (isa<AddOp, SubOp>(op))
    return isSum(op->getOperand(0)) && isSum(op->getOperand(1));
  if (isa<NegOp, CastOp, ReshapeOp>(op))
    return isSum(op->getOperand(0));
  if (isa<MulOp, DivOp>(op) && !op->hasAttr(kBatchScaledAttr)) {
    Value a = op->getOperand(0), c = op->getOperand(1);
    if (isa<MulOp>(op) && !isFromBatch(c))
      return isSum(a);
    if (isa<MulOp>(op))
      std::swap(a, c);
    return !isFromBatch(c) && isSum(a);
  }
  return false;
}

FailureOr<Value> ShareBuilder::wholeBatchConstant(Operation *op, Value c) {
  Value v = f32(op->getLoc(), c);
  auto p = op->getAttrOfType<IntegerAttr>(kBatchScaledAttr);
  auto module = op->getParentOfType<ModuleOp>();
  if (!p && scalarConstant(c) && module &&
      module->hasAttr(SmpDialect::kBatchScalingUnknownAttr))
    return refuse(op, "it scales by a constant that may have been folded "
                      "from the batch's shape (importing the model at another "
                      "batch size to tell failed, or gave the loss another "
                      "form)");
  if (!p)
    return v;
  double scale = p.getInt() > 0 ? shards() : 1.0 / shards();
  return Value(
      MulOp::create(b, op->getLoc(), v, constant(op->getLoc(), scale)));
}

FailureOr<Value> ShareBuilder::crossEntropyMean(CrossEntropyOp ce) {
  Location loc = ce.getLoc();
  Value sum = CrossEntropyOp::create(b, loc, ce.getLogits(), ce.getLabels(),
                                     ce.getWeights(), ce.getIgnoreIndex(),
                                     Reduction::sum, ce.getClassesAttr());
  // Each label counts 1, or the weight of its class; over every shard.
  Value labels = ce.getLabels();
  auto lt = cast<RankedTensorType>(labels.getType());
  auto index = [&](int64_t v) -> Value {
    return ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, lt.getElementType()),
                               APInt(lt.getElementTypeBitWidth(), v,
                                     /*isSigned=*/true)));
  };
  Value ignored = EqualOp::create(b, loc, labels, index(ce.getIgnoreIndex()));
  Value counted;
  if (Value w = ce.getWeights()) {
    Value safe = WhereOp::create(b, loc, ignored, index(0), labels);
    // The normaliser carries no gradient to the weights (a parameter when
    // the file stores them as an initializer): as on one device, where the
    // cross-entropy's gradient does not reach them.
    auto gather = GatherOp::create(b, loc, w, safe, b.getI64IntegerAttr(0));
    gather->setAttr(SmpDialect::kNoGradAttr, b.getUnitAttr());
    counted = WhereOp::create(b, loc, ignored, constant(loc, 0.0),
                              toF32(b, loc, gather));
  } else {
    counted = CastOp::create(b, loc, lt.clone(b.getF32Type()),
                             NotOp::create(b, loc, ignored));
  }
  Value count = overShards(reduceAll<ReduceSumOp>(b, loc, counted), loc);
  return Value(DivOp::create(b, loc, f32(loc, sum), count));
}

FailureOr<Value> ShareBuilder::ratio(Operation *op, Value num, Value den) {
  if (!isSum(num) || !isSum(den))
    return refuse(op, "it divides by a value computed from the batch, and "
                      "only a ratio of two sums over the batch is split");
  if (isFromParams(den))
    return refuse(op, "it divides by a sum over the batch computed from the "
                      "parameters (only a denominator from the inputs, a "
                      "mask or a count, is split)");
  auto a = share(num);
  if (failed(a))
    return failure();
  Value d = overShards(den, op->getLoc());
  return Value(DivOp::create(b, op->getLoc(), *a, d));
}

FailureOr<Value> ShareBuilder::share(Value v) {
  Operation *op = v.getDefiningOp();
  Location loc = op ? op->getLoc() : v.getLoc();
  if (!isFromBatch(v))
    return Value(DivOp::create(b, loc, f32(loc, v), constant(loc, shards())));
  if (isSum(v) && !isa<AddOp, SubOp, MulOp, DivOp, NegOp>(op))
    return f32(loc, v);
  if (auto r = dyn_cast<ReduceMeanOp>(op)) {
    if (reducesAll(r))
      return Value(DivOp::create(b, loc, f32(loc, v), constant(loc, shards())));
    return refuse(op, "its mean does not reduce every dim");
  }
  if (auto ce = dyn_cast<CrossEntropyOp>(op)) {
    if (ce.getReduction() == Reduction::mean)
      return crossEntropyMean(ce);
    return refuse(op, "it is a cross-entropy without a reduction");
  }
  if (isa<AddOp, SubOp>(op)) {
    if (!isScalar(op->getOperand(0)) || !isScalar(op->getOperand(1)))
      return refuse(op, "it adds a tensor to a scalar");
    auto l = share(op->getOperand(0));
    auto r = failed(l) ? FailureOr<Value>() : share(op->getOperand(1));
    if (failed(r))
      return failure();
    if (isa<AddOp>(op))
      return Value(AddOp::create(b, loc, *l, *r));
    return Value(SubOp::create(b, loc, *l, *r));
  }
  if (isa<NegOp, CastOp, ReshapeOp>(op)) {
    auto s = share(op->getOperand(0));
    if (failed(s))
      return failure();
    return isa<NegOp>(op) ? Value(NegOp::create(b, loc, *s)) : *s;
  }
  if (isa<MulOp, DivOp>(op)) {
    Value a = op->getOperand(0), c = op->getOperand(1);
    if (!isScalar(a) || !isScalar(c))
      return refuse(op, "it scales by a tensor");
    if (isa<DivOp>(op) && isFromBatch(c))
      return ratio(op, a, c);
    if (isa<MulOp>(op) && !isFromBatch(a))
      std::swap(a, c);
    if (isFromBatch(c))
      return refuse(op, "it multiplies two values computed from the batch");
    auto s = share(a);
    if (failed(s))
      return failure();
    auto k = wholeBatchConstant(op, c);
    if (failed(k))
      return failure();
    if (isa<MulOp>(op))
      return Value(MulOp::create(b, loc, *s, *k));
    return Value(DivOp::create(b, loc, *s, *k));
  }
  return refuse(op, Twine("it is computed by '") +
                        op->getName().getStringRef() +
                        "', not a sum or mean over the samples");
}

} // namespace

LogicalResult markBatchScaledLossConstants(func::FuncOp main,
                                           func::FuncOp probe,
                                           StringRef lossName, int64_t factor) {
  Value v = namedOutput(main, lossName), w = namedOutput(probe, lossName);
  if (!v || !w)
    return success(); // smp-build-gradients reports a missing output
  return compareLossConstants(v, w, lossName, factor);
}

static bool scalesByConstant(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || !isLossArithmetic(op))
    return false;
  for (Value in : op->getOperands())
    if ((isa<MulOp, DivOp>(op) && scalarConstant(in)) || scalesByConstant(in))
      return true;
  return false;
}

bool lossScalesByConstant(func::FuncOp main, StringRef lossName) {
  Value v = namedOutput(main, lossName);
  return v && scalesByConstant(v);
}

LogicalResult forEachLossTerm(Value loss,
                              function_ref<LogicalResult(Value)> fn) {
  Operation *op = loss.getDefiningOp();
  if (op && isLossArithmetic(op)) {
    for (Value in : op->getOperands())
      if (failed(forEachLossTerm(in, fn)))
        return failure();
    return success();
  }
  if (auto r = dyn_cast_or_null<ReduceSumOp>(op))
    return fn(r.getInput());
  if (auto r = dyn_cast_or_null<ReduceMeanOp>(op))
    return fn(r.getInput());
  if (auto ce = dyn_cast_or_null<CrossEntropyOp>(op))
    return failure(failed(fn(ce.getLogits())) || failed(fn(ce.getLabels())));
  return fn(loss);
}

FailureOr<Value> buildLossShare(OpBuilder &b, Value loss, StringRef name,
                                int64_t dp, int64_t microbatches,
                                SmallVectorImpl<Value> &stepSums) {
  ShareBuilder builder(b, name, dp, microbatches, stepSums);
  return builder.share(loss);
}

} // namespace smp
