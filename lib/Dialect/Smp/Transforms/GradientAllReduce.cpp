//===- GradientAllReduce.cpp - smp-gradient-all-reduce --------------------===//
//
// Implements `smp-gradient-all-reduce`: the gradients of @train_step (those
// that are not ZeRO-1 shards) and its loss are summed over the data-parallel
// ranks, the gradients in buckets.
//
//===----------------------------------------------------------------------===//

#include "EvalAccuracy.h"
#include "TrainStepContract.h"
#include "TrainStepUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-gradient-all-reduce"

namespace smp {
#define GEN_PASS_DEF_SMPGRADIENTALLREDUCEPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// Sums the gradients over the data-parallel ranks of `group` in buckets:
/// gradients of one stage and element type, in the order the backward
/// computes them, are flattened and concatenated up to bucket-mb MiB,
/// all-reduced at once (in place: smp::inPlaceOperands) and split back.
/// Each bucket's concatenation and all-reduce follow its last gradient,
/// its split stays at the end (where the optimizer reads the gradients),
/// so that nothing between reads the all-reduce's buffer and a backend
/// can run it beside the rest of the backward (runtime/exec's lanes).
void allReduceInBuckets(OpBuilder &b, Location loc, SmallVector<Value> &grads,
                        ArrayRef<Value> params, double bucketMb,
                        DpGroup group) {
  Block *block = b.getInsertionBlock();
  auto together = [&](unsigned x, unsigned y) {
    return stageOf(params[x]) == stageOf(params[y]) &&
           getElementTypeOrSelf(grads[x].getType()) ==
               getElementTypeOrSelf(grads[y].getType());
  };
  for (const SmallVector<unsigned> &bucket :
       gradientBuckets(*block, grads, bucketMb, together)) {
    SmallVector<Value> values;
    for (unsigned k : bucket)
      values.push_back(grads[k]);
    Operation *after = lastDefinition(*block, values);
    Operation *mark = lastBefore(b);
    Operation *reduce = nullptr; // the last op moved after the gradients
    if (bucket.size() == 1) {
      grads[bucket[0]] = allReduceDp(b, loc, grads[bucket[0]], group);
      reduce = lastBefore(b);
    } else {
      SmallVector<Value> flat;
      for (unsigned k : bucket) {
        auto t = cast<RankedTensorType>(grads[k].getType());
        flat.push_back(ReshapeOp::create(
            b, loc, t.clone(ArrayRef<int64_t>{t.getNumElements()}), grads[k]));
      }
      Value summed = allReduceDp(
          b, loc, ConcatOp::create(b, loc, flat, b.getI64IntegerAttr(0)),
          group);
      reduce = lastBefore(b);
      int64_t offset = 0;
      for (unsigned k : bucket) {
        auto t = cast<RankedTensorType>(grads[k].getType());
        int64_t n = t.getNumElements();
        Value part = SliceOp::create(b, loc, summed,
                                     b.getDenseI64ArrayAttr({offset}),
                                     b.getDenseI64ArrayAttr({offset + n}),
                                     b.getDenseI64ArrayAttr({1}));
        part.getDefiningOp()->setAttr(SmpDialect::kViewAttr, b.getUnitAttr());
        grads[k] = ReshapeOp::create(b, loc, t, part);
        offset += n;
      }
    }
    // Move the bucket's ops up to its all-reduce right after its last
    // gradient.
    Operation *first = mark ? mark->getNextNode() : &block->front();
    if (after && first && reduce) {
      SmallVector<Operation *> ops;
      for (Operation *op = first; op; op = op->getNextNode()) {
        ops.push_back(op);
        if (op == reduce)
          break;
      }
      Operation *last = after;
      for (Operation *op : ops) {
        op->moveAfter(after);
        after = op;
      }
      // With the last gradient's marks (stage, micro-batch, backward):
      // under a pipeline the bucket then runs in that micro-batch's
      // backward, beside the rest of it, rather than after the whole
      // schedule (smp-pipeline-schedule's epilogue: ops without a
      // micro-batch).
      OpBuilder marks(reduce->getContext());
      marks.setInsertionPointAfter(reduce);
      markLike(marks, last, last);
    }
  }
}


struct SmpGradientAllReducePass
    : public smp::impl::SmpGradientAllReducePassBase<SmpGradientAllReducePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = trainStep(module, "smp-gradient-all-reduce");
    if (failed(f))
      return signalPassFailure();
    if (dataParallelRanks(module) <= 1)
      return; // one replica: nothing to sum
    OpBuilder b(f->getBody().front().getTerminator());
    Location loc = f->getLoc();
    // Whole gradients are summed over every rank; a ZeRO chunk is summed
    // over its shard group already, and under hybrid sharding still needs
    // the sum over the replica groups (once per step, after the
    // micro-batches' reduce-scatters, as MiCS does).
    bool hybrid = !dataParallelAxes(module, DpGroup::Replica).empty();
    for (bool sharded : {false, true}) {
      if (sharded && !hybrid)
        continue;
      SmallVector<Gradient> grads;
      SmallVector<Value> values, params;
      for (const Gradient &g : gradients(*f))
        if (g.sharded == sharded) {
          grads.push_back(g);
          values.push_back(g.value);
          params.push_back(g.param);
        }
      allReduceInBuckets(b, loc, values, params, bucketMb,
                         sharded ? DpGroup::Replica : DpGroup::All);
      for (auto [g, v] : llvm::zip(grads, values))
        setResult(*f, g.result, v);
    }
    // The global loss, on every rank; so are an evaluation's counts
    // (EvalAccuracy.h).
    for (unsigned i = 0; i < f->getNumResults(); ++i)
      if (auto name =
              f->getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr);
          name && (name.getValue() == "loss" ||
                   smp::base::isEvalCountOutput(name.getValue())))
        setResult(
            *f, i,
            allReduceDp(b, loc,
                        f->getBody().front().getTerminator()->getOperand(i)));
    // An evaluation's predictions: every rank's samples, in the global
    // batch's order (data shard d holds its d-th part).
    for (unsigned i = 0; i < f->getNumResults(); ++i)
      if (auto name =
              f->getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr);
          name && smp::base::isEvalGatherOutput(name.getValue()))
        setResult(*f, i,
                  gatherDp(b, loc,
                           f->getBody().front().getTerminator()->getOperand(i),
                           dataParallelRanks(module)));
  }
};

} // namespace
