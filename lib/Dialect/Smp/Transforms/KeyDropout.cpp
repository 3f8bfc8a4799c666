//===- KeyDropout.cpp - Where each dropout's tensor sits in the batch -----===//
//
// Implements `smp-key-dropout` (see Passes.td and SampleDims.h).
//
//===----------------------------------------------------------------------===//

#include "SampleDims.h"
#include "smp/Dialect/Smp/IR/DropoutKey.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/DenseSet.h"

namespace smp {
#define GEN_PASS_DEF_SMPKEYDROPOUTPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpKeyDropoutPass
    : public smp::impl::SmpKeyDropoutPassBase<SmpKeyDropoutPass> {
  using Base::Base;

  void runOnOperation() override {
    auto f = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!f)
      return;
    // smp.dropout, and the fused attention ops' dropout on their
    // probabilities (whose samples lead like the query's).
    SmallVector<Operation *> dropouts;
    f.walk([&](Operation *op) {
      if (drawsDropout(op))
        dropouts.push_back(op);
    });
    if (dropouts.empty())
      return;
    SampleDims dims(f);
    int64_t mb = dims.microbatch();
    bool split = dp * microbatches > 1;
    // The draws of one stream (a Dropout and its mask output, drawn on
    // ones that hold no samples) are placed alike.
    llvm::DenseSet<int64_t> sampled;
    for (Operation *d : dropouts)
      if (dims.leading(dropoutSampled(d)))
        sampled.insert(dropoutStream(d));
    for (Operation *d : dropouts) {
      bool leading = sampled.contains(dropoutStream(d));
      if (split && !leading &&
          failed(dims.check(dropoutSampled(d),
                            isa<DropoutOp>(d)
                                ? "the input of this dropout (its random mask "
                                  "is drawn for the global batch, sample by "
                                  "sample)"
                                : "the query of this attention (the random "
                                  "mask of its dropout is drawn for the "
                                  "global batch, sample by sample)",
                            0, dp, microbatches)))
        return signalPassFailure();
      setDropoutPlace(d, DropoutPlace::Samples, leading ? mb : 0);
      setDropoutPlace(d, DropoutPlace::SampleOffset, 0);
      setDropoutPlace(d, DropoutPlace::ShardSamples,
                      leading ? mb * microbatches : 0);
    }
  }
};

} // namespace
