//===- MarkEvalPadding.cpp - Whether an evaluation can pad a short batch --===//
//
// Implements `smp-mark-eval-padding` (see Passes.td and SampleDims.h).
//
//===----------------------------------------------------------------------===//

#include "OwnLossCount.h"
#include "OwnLossPadding.h"
#include "SampleDims.h"
#include "TrainStepUtils.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"

namespace smp {
#define GEN_PASS_DEF_SMPMARKEVALPADDINGPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpMarkEvalPaddingPass
    : public smp::impl::SmpMarkEvalPaddingPassBase<SmpMarkEvalPaddingPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto f = module.lookupSymbol<func::FuncOp>("main");
    if (!f || f.isExternal())
      return;
    std::string labels, why;
    if (failed(decide(f, labels, why)))
      return; // a missing output: smp-build-gradients reports it
    Builder b(&getContext());
    for (StringRef a :
         {SmpDialect::kEvalPadLabelsAttr, SmpDialect::kEvalNoPadAttr,
          SmpDialect::kEvalCountedLabelsAttr, SmpDialect::kEvalNoCountAttr,
          SmpDialect::kEvalLossSumsAttr})
      module->removeAttr(a);
    if (labels.empty()) {
      module->setAttr(SmpDialect::kEvalNoPadAttr, b.getStringAttr(why));
      return;
    }
    module->setAttr(SmpDialect::kEvalPadLabelsAttr, b.getStringAttr(labels));
    if (!StringRef(loss).contains(':'))
      markCounted(f, labels);
  }

  /// How a model's own loss combines over an evaluation batch other than
  /// the global one (OwnLossCount.h): a sum of its parts', or their mean
  /// weighted by the labels each counts.
  void markCounted(func::FuncOp f, StringRef labels) {
    ModuleOp module = getOperation();
    Builder b(&getContext());
    if (lossSumsSamples(f, namedOutput(f, loss))) {
      module->setAttr(SmpDialect::kEvalLossSumsAttr, b.getUnitAttr());
      return;
    }
    std::string why;
    SmallVector<int64_t> ranges =
        countedLabelRanges(f, namedOutput(f, loss), labels, why);
    if (!ranges.empty())
      module->setAttr(SmpDialect::kEvalCountedLabelsAttr,
                      b.getDenseI64ArrayAttr(ranges));
    else
      module->setAttr(SmpDialect::kEvalNoCountAttr, b.getStringAttr(why));
  }

  /// The labels input padding samples are left out through (a
  /// cross-entropy mean over the counted labels, computed sample by
  /// sample), or why the loss cannot leave them out.
  LogicalResult decide(func::FuncOp f, std::string &labels, std::string &why) {
    SmallVector<StringRef> parts;
    StringRef(loss).split(parts, ':');
    if (parts.size() == 1)
      return ownLoss(f, labels, why);
    if (parts.size() != 3)
      return failure(); // smp-build-gradients reports the malformed loss
    if (parts[0] != "cross_entropy") {
      why = "an " + parts[0].str() +
            " loss averages over every sample of the batch, padding "
            "included";
      return success();
    }
    Value logits = namedOutput(f, parts[1]);
    if (!logits)
      return failure();
    SampleDims dims(f);
    if (dims.microbatch() == 0) {
      why = "the model has no input";
      return success();
    }
    std::string notPerSample = dims.notLeading(logits);
    if (notPerSample.empty())
      labels = parts[2].str();
    else
      why = "the output '" + parts[1].str() +
            "' the loss reads is not computed sample by sample (" +
            notPerSample + "), so padding samples would change the others'";
    return success();
  }

  /// A model's own loss output (OwnLossPadding.h).
  LogicalResult ownLoss(func::FuncOp f, std::string &labels, std::string &why) {
    Value v = namedOutput(f, loss);
    auto t = v ? dyn_cast<RankedTensorType>(v.getType()) : nullptr;
    if (!t || t.getNumElements() != 1)
      return failure(); // smp-build-gradients reports it
    SampleDims dims(f);
    if (dims.microbatch() == 0) {
      why = "the model has no input";
      return success();
    }
    OwnLossPadding padding(f, dims);
    why = padding.whyNot(v, loss);
    labels = padding.labels();
    return success();
  }
};

} // namespace
