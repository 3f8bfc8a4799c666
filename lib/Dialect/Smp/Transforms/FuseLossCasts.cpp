//===- FuseLossCasts.cpp - smp-fuse-loss-casts ----------------------------===//
//
// Implements `smp-fuse-loss-casts`: a bf16 (or f16) model's loss is built on
// its logits cast up to f32 (smp-mixed-precision casts the function's
// results up), and the logits' gradient is cast back down. For a language
// model those are the step's largest tensors ([tokens, vocab]): the f32
// copy of the logits and the f32 gradient cost two passes each and, for
// GPT-2 at 16 x 1024 tokens, 3.3 GB apiece. The cross-entropy and its
// gradient read the 16-bit logits themselves (computing in f32 as before);
// the loss stays f32 and the gradient is written in the logits' type. An
// evaluation's label_rank (--eval-accuracy) reads the 16-bit logits too.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-fuse-loss-casts"

namespace smp {
#define GEN_PASS_DEF_SMPFUSELOSSCASTSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// The 16-bit float logits `v` was widened from (cast f16/bf16 -> f32), or
/// null.
Value narrowLogits(Value v) {
  auto cast = v.getDefiningOp<CastOp>();
  if (!cast)
    return {};
  Type from = cast.getInput().getType().getElementType();
  if (!cast.getType().getElementType().isF32() ||
      !(from.isF16() || from.isBF16()))
    return {};
  return cast.getInput();
}

/// cross_entropy(cast(x)) -> cross_entropy(x) with the loss still f32.
/// Class weights (of the logits' type) keep the cast.
bool fuseLoss(CrossEntropyOp ce) {
  Value x = narrowLogits(ce.getLogits());
  if (!x || ce.getWeights())
    return false;
  Value widened = ce.getLogits();
  ce.getLogitsMutable().assign(x);
  if (widened.use_empty())
    widened.getDefiningOp()->erase();
  return true;
}

/// label_rank(cast(x)) -> label_rank(x): an evaluation's accuracy reads
/// the 16-bit logits too (widening is exact: the same ranks), so the f32
/// copy is not kept for it alone.
bool fuseRank(LabelRankOp rank) {
  Value x = narrowLogits(rank.getLogits());
  if (!x)
    return false;
  Value widened = rank.getLogits();
  rank.getLogitsMutable().assign(x);
  if (widened.use_empty())
    widened.getDefiningOp()->erase();
  return true;
}

/// cast(cross_entropy_grad(cast(x)) -> x's type) -> cross_entropy_grad(x),
/// which writes the gradient in x's type, when the f32 gradient has no
/// other use.
bool fuseLossGrad(CrossEntropyGradOp grad) {
  Value x = narrowLogits(grad.getLogits());
  if (!x || grad.getWeights() || !grad.getResult().hasOneUse())
    return false;
  auto down = dyn_cast<CastOp>(*grad.getResult().getUsers().begin());
  if (!down || down.getType() != x.getType())
    return false;
  Value widened = grad.getLogits();
  OpBuilder b(down);
  auto fused = CrossEntropyGradOp::create(
      b, grad.getLoc(), x, grad.getLabels(), Value(), grad.getGrad(),
      grad.getIgnoreIndexAttr(), grad.getReductionAttr(),
      grad.getClassesAttr());
  fused->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
  down.getResult().replaceAllUsesWith(fused.getResult());
  down.erase();
  grad.erase();
  if (widened.use_empty())
    widened.getDefiningOp()->erase();
  return true;
}

struct SmpFuseLossCastsPass
    : public smp::impl::SmpFuseLossCastsPassBase<SmpFuseLossCastsPass> {
  void runOnOperation() override {
    llvm::SmallVector<CrossEntropyGradOp> grads;
    getOperation().walk([&](CrossEntropyGradOp op) { grads.push_back(op); });
    for (CrossEntropyGradOp op : grads)
      fuseLossGrad(op);
    llvm::SmallVector<LabelRankOp> ranks;
    getOperation().walk([&](LabelRankOp op) { ranks.push_back(op); });
    for (LabelRankOp op : ranks)
      fuseRank(op);
    llvm::SmallVector<CrossEntropyOp> losses;
    getOperation().walk([&](CrossEntropyOp op) { losses.push_back(op); });
    for (CrossEntropyOp op : losses)
      fuseLoss(op);
  }
};

} // namespace
