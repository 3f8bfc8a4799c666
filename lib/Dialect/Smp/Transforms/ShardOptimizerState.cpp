//===- ShardOptimizerState.cpp - smp-shard-optimizer-state (ZeRO-1) -------===//
//
// Implements `smp-shard-optimizer-state`: each gradient of @train_step
// becomes this data-parallel rank's summed chunk (see TrainStepContract.h).
//
//===----------------------------------------------------------------------===//

#include "TrainStepContract.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
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
    int64_t dp = dataParallelRanks(module);
    if (dp <= 1) {
      module.emitError() << "smp-shard-optimizer-state needs data parallelism "
                            "(a shard.grid @dp of more than one rank: "
                            "smp-build-gradients{dp=N})";
      return signalPassFailure();
    }
    OpBuilder b(f->getBody().front().getTerminator());
    Location loc = f->getLoc();
    for (const Gradient &g : gradients(*f)) {
      if (g.sharded)
        continue;
      // Each rank keeps the sum of its chunk of the flattened gradient.
      Value flat = flattenPadded(b, loc, g.value, dp);
      auto t = cast<RankedTensorType>(flat.getType());
      auto chunk = t.clone(ArrayRef<int64_t>{t.getDimSize(0) / dp});
      Value mine = shard::ReduceScatterOp::create(
          b, loc, chunk, FlatSymbolRefAttr::get(b.getContext(), "dp"),
          b.getDenseI16ArrayAttr({0}), flat,
          shard::ReductionKindAttr::get(b.getContext(),
                                        shard::ReductionKind::Sum),
          b.getIndexAttr(0));
      setResult(*f, g.result, mine);
      setResultLayout(
          *f, g.result,
          LayoutAttr::chunk(
              b.getContext(),
              cast<RankedTensorType>(g.param.getType()).getShape()));
    }
  }
};

} // namespace
