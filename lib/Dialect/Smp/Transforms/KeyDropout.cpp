//===- KeyDropout.cpp - Where each dropout's tensor sits in the batch -----===//
//
// Implements `smp-key-dropout` (see Passes.td and SampleDims.h).
//
//===----------------------------------------------------------------------===//

#include "SampleDims.h"
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
    SmallVector<DropoutOp> dropouts;
    f.walk([&](DropoutOp d) { dropouts.push_back(d); });
    if (dropouts.empty())
      return;
    SampleDims dims(f);
    int64_t mb = dims.microbatch();
    bool split = dp * microbatches > 1;
    // The draws of one stream (a Dropout and its mask output, drawn on
    // ones that hold no samples) are placed alike.
    llvm::DenseSet<uint64_t> sampled;
    for (DropoutOp d : dropouts)
      if (dims.leading(d.getInput()))
        sampled.insert(d.getStream());
    for (DropoutOp d : dropouts) {
      bool leading = sampled.contains(d.getStream());
      if (split && !leading &&
          failed(dims.check(d.getInput(),
                            "the input of this dropout (its random mask is "
                            "drawn for the global batch, sample by sample)",
                            0, dp, microbatches)))
        return signalPassFailure();
      d.setSamples(leading ? mb : 0);
      d.setSampleOffset(0);
      d.setShardSamples(leading ? mb * microbatches : 0);
    }
  }
};

} // namespace
