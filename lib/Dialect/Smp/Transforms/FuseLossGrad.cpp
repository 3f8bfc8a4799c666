//===- FuseLossGrad.cpp - smp-fuse-loss-grad ------------------------------===//
//
// Implements `smp-fuse-loss-grad`: a training step's loss and the logits'
// gradient read the same logits, the step's largest tensor for a language
// model (GPT-2 at 16 x 1024 tokens: 1.65 GB of bf16). cross_entropy reads
// it once for each row's statistics, cross_entropy_grad once more for the
// same statistics and a third time for the gradient. Where the loss's
// incoming gradient is known before the loss (the step's seed: a constant,
// or the seed over the micro-batch count), one cross_entropy_with_grad
// reads a row for its statistics and again (from L2) for the gradient:
//
//   loss = cross_entropy(x, y) {attrs}
//   s    = div(1, n)                     (moved before the loss)
//   g    = cross_entropy_grad(x, y, s) {attrs}
// ->
//   loss, g = cross_entropy_with_grad(x, y, s) {attrs}
//
// The pair must share logits, labels, class weights, attributes and
// annotations, and sit in one block. The fused op takes the loss's place
// where the incoming gradient is defined before it (or its defining op's
// operands are, and the op is pure: it moves up), else the gradient's,
// where the ops between the two that read the loss are pure and the
// gradient reads none of them: they move after it (data parallelism's
// seed is 1 over the global count, an all_reduce after the loss, and the
// loss's division by that count comes before the gradient). The
// gradient may take the logits' storage as the separate gradient's did
// (inPlaceOperands). Runs in the clean-up phase after smp-fuse-loss-casts
// and smp-pad-classes, which rewrite the separate ops.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "smp-fuse-loss-grad"

namespace smp {
#define GEN_PASS_DEF_SMPFUSELOSSGRADPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// The loss `grad` is the gradient of: a cross_entropy of the same logits,
/// labels, weights, attributes and annotations in grad's block; null if
/// none.
CrossEntropyOp lossOf(CrossEntropyGradOp grad) {
  for (Operation *user : grad.getLogits().getUsers()) {
    auto loss = dyn_cast<CrossEntropyOp>(user);
    if (loss && loss->getBlock() == grad->getBlock() &&
        loss.getLabels() == grad.getLabels() &&
        loss.getWeights() == grad.getWeights() &&
        loss.getIgnoreIndex() == grad.getIgnoreIndex() &&
        loss.getReduction() == grad.getReduction() &&
        loss.getClasses() == grad.getClasses() && sameAnnotations(loss, grad))
      return loss;
  }
  return nullptr;
}

/// Makes `v` (the incoming gradient) readable at `at`: true when it is
/// defined before it, or its defining op is pure, in `at`'s block and
/// reads only values defined before `at` (it is moved there).
bool hoistBefore(Value v, Operation *at, DominanceInfo &dom) {
  if (dom.properlyDominates(v, at))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def || def->getBlock() != at->getBlock() || !isPure(def) ||
      def->getNumRegions() != 0 ||
      !llvm::all_of(def->getOperands(), [&](Value operand) {
        return dom.properlyDominates(operand, at);
      }))
    return false;
  def->moveBefore(at);
  return true;
}

/// Moves the ops between `loss` and `grad` that read the loss (directly
/// or through each other: data-parallel's division by the global count)
/// to just after `grad`, in their order: true when there are none, or all
/// are pure, without regions, and `grad` reads none of them.
bool sinkLossReaders(CrossEntropyOp loss, CrossEntropyGradOp grad) {
  llvm::SmallDenseSet<Value, 8> read{loss.getResult()};
  SmallVector<Operation *> readers;
  auto readsLoss = [&](Operation *op) {
    return llvm::any_of(op->getOperands(),
                        [&](Value v) { return read.contains(v); });
  };
  for (Operation *op = loss->getNextNode(); op != grad.getOperation();
       op = op->getNextNode()) {
    if (!readsLoss(op))
      continue;
    if (!isPure(op) || op->getNumRegions() != 0)
      return false;
    readers.push_back(op);
    read.insert(op->result_begin(), op->result_end());
  }
  if (readsLoss(grad))
    return false;
  // A read inside a region of an op between the two is not an operand.
  Block *block = loss->getBlock();
  for (Operation *user : loss->getUsers()) {
    Operation *top = block->findAncestorOpInBlock(*user);
    if (!top ||
        (!llvm::is_contained(readers, top) && !grad->isBeforeInBlock(top)))
      return false;
  }
  Operation *last = grad;
  for (Operation *op : readers) {
    op->moveAfter(last);
    last = op;
  }
  return true;
}

/// Where the fused op of `loss` and `grad` can go (see the file's
/// comment); null where it cannot.
Operation *placeOf(CrossEntropyOp loss, CrossEntropyGradOp grad,
                   DominanceInfo &dom) {
  if (grad->isBeforeInBlock(loss))
    return nullptr; // a gradient before its loss: not the step's shape
  if (hoistBefore(grad.getGrad(), loss, dom))
    return loss;
  return sinkLossReaders(loss, grad) ? grad.getOperation() : nullptr;
}

bool fuse(CrossEntropyGradOp grad, DominanceInfo &dom) {
  CrossEntropyOp loss = lossOf(grad);
  if (!loss)
    return false;
  Operation *at = placeOf(loss, grad, dom);
  if (!at)
    return false;
  OpBuilder b(at);
  auto fused = CrossEntropyWithGradOp::create(
      b, grad.getLoc(), TypeRange{loss.getType(), grad.getType()},
      grad.getLogits(), grad.getLabels(), grad.getWeights(), grad.getGrad(),
      grad.getIgnoreIndexAttr(), grad.getReductionAttr(),
      grad.getClassesAttr());
  fused->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
  loss.getResult().replaceAllUsesWith(fused.getLoss());
  grad.getResult().replaceAllUsesWith(fused.getLogitsGrad());
  loss.erase();
  grad.erase();
  return true;
}

struct SmpFuseLossGradPass
    : public smp::impl::SmpFuseLossGradPassBase<SmpFuseLossGradPass> {
  void runOnOperation() override {
    SmallVector<CrossEntropyGradOp> grads;
    getOperation().walk([&](CrossEntropyGradOp op) { grads.push_back(op); });
    DominanceInfo dom(getOperation());
    for (CrossEntropyGradOp grad : grads)
      fuse(grad, dom);
  }
};

} // namespace
