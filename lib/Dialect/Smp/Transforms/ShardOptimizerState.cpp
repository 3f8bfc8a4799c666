//===- ShardOptimizerState.cpp - smp-shard-optimizer-state (ZeRO-1) -------===//
//
// Implements `smp-shard-optimizer-state`: each gradient of @train_step
// becomes this data-parallel rank's summed chunk, reduce-scattered in
// buckets as the backward completes it (see TrainStepContract.h).
//
//===----------------------------------------------------------------------===//

#include "TrainStepContract.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-shard-optimizer-state"

namespace smp {
#define GEN_PASS_DEF_SMPSHARDOPTIMIZERSTATEPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpShardOptimizerStatePass
    : public smp::impl::SmpShardOptimizerStatePassBase<
          SmpShardOptimizerStatePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = trainStep(module, "smp-shard-optimizer-state");
    if (failed(f))
      return signalPassFailure();
    auto dp = shardedDataParallelRanks(module, "smp-shard-optimizer-state");
    if (failed(dp))
      return signalPassFailure();
    // Each rank keeps the sum of its chunk of each flattened gradient,
    // reduce-scattered in buckets as the (last micro-batch's) backward
    // completes them: beside the rest of the backward on a backend with a
    // communication stream, where a scatter at the step's end waited.
    scatterGradientChunks(*f, *dp, bucketMb, /*parts=*/false);
  }
};

} // namespace
