//===- RecomputeActivations.cpp - smp-recompute ---------------------------===//
//
// Implements `smp-recompute`: activation checkpointing on the built
// @train_step, micro-batch by micro-batch (the recomputation itself is
// Recompute.cpp's recomputeActivations).
//
//===----------------------------------------------------------------------===//

#include "Recompute.h"
#include "TrainStepContract.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-recompute"

namespace smp {
#define GEN_PASS_DEF_SMPRECOMPUTEPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpRecomputePass
    : public smp::impl::SmpRecomputePassBase<SmpRecomputePass> {
  using Base::Base;

  /// Refuses an unknown mode before anything runs.
  LogicalResult initialize(MLIRContext *ctx) override {
    return checkChoice(ctx, "recompute mode", mode,
                       {"none", "full", "selective", "gathers"});
  }

  void runOnOperation() override {
    auto f = trainStep(getOperation(), "smp-recompute");
    if (failed(f))
      return signalPassFailure();
    if (mode == "none")
      return;
    for (const BackwardRange &range : backwardRanges(*f)) {
      SmallVector<Operation *> chosen;
      for (Operation *op : range.forward) {
        auto stage = op->getAttrOfType<IntegerAttr>(SmpDialect::kStageAttr);
        if (stages.empty() ||
            (stage && llvm::is_contained(stages, stage.getInt())))
          chosen.push_back(op);
      }
      auto isCopy = [](Operation &op) { return op.hasAttr("smp.recomputed"); };
      rewriteBackward(*f, range, isCopy, [&] {
        recomputeActivations(chosen, range.begin, range.end, mode);
      });
    }
  }
};

} // namespace
