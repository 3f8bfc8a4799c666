//===- OffloadActivations.cpp - smp-offload-activations -------------------===//
//
// Implements `smp-offload-activations`: the activations that the backward of
// @train_step reads wait in host memory, micro-batch by micro-batch (the
// rewrite itself is Recompute.cpp's offloadActivations).
//
//===----------------------------------------------------------------------===//

#include "Recompute.h"
#include "TrainStepContract.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-offload-activations"

namespace smp {
#define GEN_PASS_DEF_SMPOFFLOADACTIVATIONSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpOffloadActivationsPass
    : public smp::impl::SmpOffloadActivationsPassBase<
          SmpOffloadActivationsPass> {
  using Base::Base;

  void runOnOperation() override {
    auto f = trainStep(getOperation(), "smp-offload-activations");
    if (failed(f))
      return signalPassFailure();
    for (const BackwardRange &range : backwardRanges(*f)) {
      // The prefetched copies, and the views of them the backward reads.
      auto isPrefetch = [](Operation &op) {
        return isa<PrefetchOp>(op) ||
               (isa<ReshapeOp>(op) &&
                op.getOperand(0).getDefiningOp<PrefetchOp>());
      };
      rewriteBackward(*f, range, isPrefetch, [&] {
        offloadActivations(range.forward, range.begin, range.end, horizon,
                           minBytes);
      });
    }
  }
};

} // namespace
