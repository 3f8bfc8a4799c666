//===- EvalAccuracy.cpp - An evaluation's accuracy ------------------------===//
//
// See EvalAccuracy.h. A row is a hit when no class ranks before its label
// (smp.label_rank 0): with the rows' label logits known (all-reduced by
// the vocabulary-parallel loss), each tp rank ranks its shard's classes and
// the ranks add up, so no rank holds more than its shard of the logits.
//
//===----------------------------------------------------------------------===//

#include "EvalAccuracy.h"

#include "TrainStepUtils.h"
#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp {

FailureOr<AccuracyOperands> ownLossCrossEntropy(func::FuncOp f, Value loss,
                                                StringRef name) {
  SetVector<Operation *> slice;
  BackwardSliceOptions options;
  options.inclusive = true;
  options.omitBlockArguments = true;
  (void)getBackwardSlice(loss, &slice, options);
  SmallVector<CrossEntropyOp> found;
  for (Operation *op : slice)
    if (auto ce = dyn_cast<CrossEntropyOp>(op))
      found.push_back(ce);
  if (found.size() != 1) {
    f.emitError() << "--eval-accuracy: the model's own loss '" << name
                  << "' is computed from "
                  << (found.empty()
                          ? std::string("no cross-entropy")
                          : std::to_string(found.size()) + " cross-entropies")
                  << "; an accuracy needs exactly one, whose logits' argmax "
                     "is compared with its labels (leave --eval-accuracy "
                     "out, or export the model's logits and pass --loss "
                     "cross_entropy:LOGITS:LABELS)";
    return failure();
  }
  CrossEntropyOp ce = found.front();
  AccuracyOperands a;
  a.logits = ce.getLogits();
  a.labels = ce.getLabels();
  a.ignoreIndex = ce.getIgnoreIndex();
  a.classes = ce.getClasses().value_or(0);
  return a;
}

std::pair<Value, Value> buildAccuracy(OpBuilder &b, Location loc,
                                      const AccuracyOperands &a) {
  auto lt = cast<RankedTensorType>(a.logits.getType());
  auto labelsType = cast<RankedTensorType>(a.labels.getType());
  Value offset = a.offset;
  if (!offset)
    offset = ConstantOp::create(
        b, loc,
        DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                               int64_t(0)));
  int64_t classes = a.classes > 0 ? a.classes : lt.getShape().back();
  Value rank = LabelRankOp::create(b, loc, a.logits, a.labels, offset, a.target,
                                   b.getI64IntegerAttr(classes),
                                   b.getI64IntegerAttr(a.ignoreIndex));
  if (a.target)
    rank = shard::AllReduceOp::create(b, loc, rank, "tp",
                                      ArrayRef<shard::GridAxis>{0},
                                      shard::ReductionKind::Sum);
  Type f32 = b.getF32Type();
  Value kept = keptLabels(b, loc, a.labels, a.ignoreIndex, f32);
  Value first = CastOp::create(
      b, loc, labelsType.clone(f32),
      EqualOp::create(b, loc, rank, scalarConst(b, loc, f32, 0.0)));
  Value hits =
      reduceAll<ReduceSumOp>(b, loc, MulOp::create(b, loc, first, kept));
  return {hits, reduceAll<ReduceSumOp>(b, loc, kept)};
}

} // namespace smp
