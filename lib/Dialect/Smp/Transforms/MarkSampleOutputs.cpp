//===- MarkSampleOutputs.cpp - Which outputs a batch computes per sample -===//
//
// Implements `smp-mark-sample-outputs` (see Passes.td and SampleDims.h).
//
//===----------------------------------------------------------------------===//

#include "SampleDims.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace smp {
#define GEN_PASS_DEF_SMPMARKSAMPLEOUTPUTSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// "per-sample", or why consecutive batches of `v` are not its values over
/// their concatenation.
std::string samplesOf(const SampleDims &dims, Value v) {
  std::string why = dims.notLeading(v);
  return why.empty() ? "per-sample" : why;
}

struct SmpMarkSampleOutputsPass
    : public smp::impl::SmpMarkSampleOutputsPassBase<SmpMarkSampleOutputsPass> {
  using Base::Base;

  void runOnOperation() override {
    auto f = getOperation().lookupSymbol<func::FuncOp>("main");
    if (!f || f.isExternal())
      return;
    SampleDims dims(f);
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    Builder b(f.getContext());
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      f.setResultAttr(i, SmpDialect::kSamplesAttr,
                      b.getStringAttr(dims.microbatch() > 0
                                          ? samplesOf(dims, v)
                                          : "the model has no input"));
  }
};

} // namespace
