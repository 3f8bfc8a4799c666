//===- CheckSampleSplit.cpp - A split batch's forward is per sample -------===//
//
// Implements `smp-check-sample-split` (see Passes.td and SampleDims.h).
//
//===----------------------------------------------------------------------===//

#include "SampleDims.h"
#include "TrainStepUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/LossShare.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

namespace smp {
#define GEN_PASS_DEF_SMPCHECKSAMPLESPLITPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpCheckSampleSplitPass
    : public smp::impl::SmpCheckSampleSplitPassBase<SmpCheckSampleSplitPass> {
  using Base::Base;

  void runOnOperation() override {
    if (dp * microbatches <= 1)
      return;
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>("main");
    if (!f)
      return; // smp-build-gradients reports it
    if (failed(check(f)))
      signalPassFailure();
  }

  /// A missing output is left to smp-build-gradients, which reports it.
  LogicalResult check(func::FuncOp f) {
    SampleDims dims(f);
    SmallVector<StringRef> parts;
    StringRef(loss).split(parts, ':');
    // cross_entropy:LOGITS:LABELS, mse:OUTPUT:TARGET: the loss adds an
    // input (labels, targets) split along dim 0.
    if (parts.size() == 3) {
      Value v = namedOutput(f, parts[1]);
      return v ? dims.check(v,
                            "the output '" + parts[1].str() +
                                "' that the loss reads",
                            0, dp, microbatches)
               : success();
    }
    Value v = parts.size() == 1 ? namedOutput(f, parts[0]) : nullptr;
    if (!v)
      return success();
    std::string what = "the loss output '" + parts[0].str() + "'";
    return forEachLossTerm(
        v, [&](Value x) { return dims.check(x, what, -1, dp, microbatches); });
  }
};

} // namespace
