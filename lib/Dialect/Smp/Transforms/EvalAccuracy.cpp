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
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace smp {

FailureOr<AccuracyOperands> ownLossCrossEntropy(func::FuncOp f, Value loss,
                                                StringRef name) {
  SmallVector<CrossEntropyOp> found;
  llvm::DenseSet<Operation *> seen;
  SmallVector<Operation *> work;
  if (Operation *def = loss.getDefiningOp())
    work.push_back(def);
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!seen.insert(op).second)
      continue;
    if (auto ce = dyn_cast<CrossEntropyOp>(op))
      found.push_back(ce);
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        work.push_back(def);
  }
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
  auto scalar = [&](Type t, int64_t value) -> Value {
    Attribute v = isa<FloatType>(t) ? Attribute(b.getFloatAttr(t, value))
                                    : Attribute(b.getIntegerAttr(t, value));
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(RankedTensorType::get({}, t), v));
  };
  Value offset = a.offset ? a.offset : scalar(b.getI64Type(), 0);
  int64_t classes = a.classes > 0 ? a.classes : lt.getShape().back();
  Value rank = LabelRankOp::create(b, loc, a.logits, a.labels, offset, a.target,
                                   b.getI64IntegerAttr(classes),
                                   b.getI64IntegerAttr(a.ignoreIndex));
  if (a.target)
    rank = shard::AllReduceOp::create(b, loc, rank, "tp",
                                      ArrayRef<shard::GridAxis>{0},
                                      shard::ReductionKind::Sum);
  Type f32 = b.getF32Type();
  auto asF32 = [&](Value v) -> Value {
    return CastOp::create(b, loc, labelsType.clone(f32), v);
  };
  Value kept = asF32(NotOp::create(
      b, loc,
      EqualOp::create(b, loc, a.labels,
                      scalar(labelsType.getElementType(), a.ignoreIndex))));
  Value first = asF32(EqualOp::create(b, loc, rank, scalar(f32, 0)));
  Value hits =
      reduceAll<ReduceSumOp>(b, loc, MulOp::create(b, loc, first, kept));
  return {hits, reduceAll<ReduceSumOp>(b, loc, kept)};
}

} // namespace smp
