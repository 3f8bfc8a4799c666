//===- AttentionLayout.cpp - smp-attention-layout ------------------------===//
//
// Implements `smp-attention-layout`: models view each projection's output
// [B, S, H * D] as heads [B, S, H, D] and transpose it to [B, H, S, D] for
// attention, then transpose the output back before merging the heads. An
// smp.attention whose q, k and v are such transposes reads the untransposed
// values instead (`bshd`), and its output's transposes back are its output:
// per layer three copies of q, k and v and one of the output go from the
// forward, and (through the gradient, which keeps the layout) those of dq,
// dk, dv and the output's gradient from the backward.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/DropoutKey.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "smp-attention-layout"

namespace smp {
#define GEN_PASS_DEF_SMPATTENTIONLAYOUTPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// Whether t swaps dims 1 and 2 of a rank-4 tensor.
bool swapsHeadsAndSeq(TransposeOp t) {
  return t && t.getPerm() == ArrayRef<int64_t>{0, 2, 1, 3};
}

/// x when v = transpose(x) swapping dims 1 and 2, else null.
Value headsFirstSource(Value v) {
  auto t = v.getDefiningOp<TransposeOp>();
  return swapsHeadsAndSeq(t) ? t.getInput() : Value();
}

void fuse(AttentionOp op) {
  Value q = headsFirstSource(op.getQuery()), k = headsFirstSource(op.getKey()),
        v = headsFirstSource(op.getValue());
  if (!q || !k || !v)
    return;
  OpBuilder b(op);
  auto fused = AttentionOp::create(b, op.getLoc(), q, k, v, op.getMask(),
                                   op.getScaleAttr(), op.getCausalAttr(),
                                   b.getBoolAttr(true));
  copyDropoutKey(op, fused); // the probabilities are [B, Hq, S, Sk] in both
  // The output's transposes back to [B, S, H, Dv] are the fused output;
  // anything else reads it transposed to [B, H, S, Dv] once.
  Value back;
  for (OpOperand &use : llvm::make_early_inc_range(op.getResult().getUses())) {
    auto t = dyn_cast<TransposeOp>(use.getOwner());
    if (swapsHeadsAndSeq(t)) {
      t.getResult().replaceAllUsesWith(fused.getResult());
      t.erase();
      continue;
    }
    if (!back)
      back = TransposeOp::create(b, op.getLoc(), fused.getResult(),
                                 b.getDenseI64ArrayAttr({0, 2, 1, 3}));
    use.set(back);
  }
  op.getLse().replaceAllUsesWith(fused.getLse());
  // The input transposes left unused (self-attention may read one for all
  // three: each is erased once).
  SetVector<Operation *> inputs;
  for (Value in : {op.getQuery(), op.getKey(), op.getValue()})
    inputs.insert(in.getDefiningOp());
  op.erase();
  for (Operation *t : inputs)
    if (t->use_empty())
      t->erase();
}

struct SmpAttentionLayoutPass
    : smp::impl::SmpAttentionLayoutPassBase<SmpAttentionLayoutPass> {
  void runOnOperation() override {
    SmallVector<AttentionOp> ops;
    getOperation().walk([&](AttentionOp op) {
      if (!op.getBshd())
        ops.push_back(op);
    });
    for (AttentionOp op : ops)
      fuse(op);
  }
};

} // namespace
