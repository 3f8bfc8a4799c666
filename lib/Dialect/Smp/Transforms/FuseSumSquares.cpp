//===- FuseSumSquares.cpp - smp-fuse-sum-squares --------------------------===//
//
// Implements `smp-fuse-sum-squares`: the gradient norm sums, per parameter,
// reduce_sum(mul(g, g)) and adds those scalars one by one: three ops per
// parameter (444 launches a GPT-2 124M step on a GPU, most of them on tiny
// tensors). A chain of such adds becomes one smp.sum_squares of all the
// gradients, whose kernels round as the chain did.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-fuse-sum-squares"

namespace smp {
#define GEN_PASS_DEF_SMPFUSESUMSQUARESPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// The inputs whose squares `v` sums, with the ops that compute it (to
/// erase), when v is an f32 scalar used once: reduce_sum over every dim of
/// mul(x, x) (each used once, x f32), or a sum_squares.
bool termOf(Value v, SmallVectorImpl<Value> &inputs,
            SmallVectorImpl<Operation *> &ops) {
  auto scalar = dyn_cast<RankedTensorType>(v.getType());
  if (!scalar || scalar.getRank() != 0 || !scalar.getElementType().isF32() ||
      !v.hasOneUse())
    return false;
  if (auto ss = v.getDefiningOp<SumSquaresOp>()) {
    llvm::append_range(inputs, ss.getInputs());
    ops.push_back(ss);
    return true;
  }
  auto sum = v.getDefiningOp<ReduceSumOp>();
  if (!sum || sum.getKeepdims())
    return false;
  auto mul = sum.getInput().getDefiningOp<MulOp>();
  if (!mul || mul.getLhs() != mul.getRhs() || !mul.getResult().hasOneUse() ||
      mul.getType() != mul.getLhs().getType())
    return false;
  auto x = cast<RankedTensorType>(mul.getLhs().getType());
  if (!x.getElementType().isF32() ||
      static_cast<int64_t>(sum.getAxes().size()) != x.getRank())
    return false;
  inputs.push_back(mul.getLhs());
  ops.push_back(sum);
  ops.push_back(mul);
  return true;
}

/// add(a, b) of two terms -> sum_squares(a's inputs, b's inputs), in the
/// add's place (a's inputs first: the order the adds summed them in).
bool fuseAdd(AddOp add) {
  SmallVector<Value> inputs;
  SmallVector<Operation *> ops;
  if (!termOf(add.getLhs(), inputs, ops) || !termOf(add.getRhs(), inputs, ops))
    return false;
  OpBuilder b(add);
  auto fused = SumSquaresOp::create(b, add.getLoc(), add.getType(), inputs);
  fused->setDiscardableAttrs(add->getDiscardableAttrDictionary());
  add.getResult().replaceAllUsesWith(fused.getResult());
  add.erase();
  for (Operation *op : ops)
    op->erase();
  return true;
}

struct SmpFuseSumSquaresPass
    : public smp::impl::SmpFuseSumSquaresPassBase<SmpFuseSumSquaresPass> {
  void runOnOperation() override {
    // In program order: an add's operands are fused before the add.
    llvm::SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp op) { adds.push_back(op); });
    for (AddOp op : adds)
      fuseAdd(op);
  }
};

} // namespace
