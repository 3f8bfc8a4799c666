//===- PackAttention.cpp - smp-pack-attention -----------------------------===//
//
// Implements `smp-pack-attention`: a fused QKV projection (GPT-2's c_attn,
// [B, S, (Hq + 2 Hkv) D]) is split along its last axis into q, k and v, each
// viewed as [B, S, H, D] heads for smp.attention (bshd); the backward
// concatenates dq, dk and dv back into the projection's gradient. The split
// and the concatenation each copy the whole tensor. Here the attention ops
// read the projection in place (smp.packed_attention and
// smp.packed_attention_grad on its [B, S, Hq + 2 Hkv, D] view), and the
// gradient is written packed: both copies go, and the forward keeps one
// tensor for the backward instead of three.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/DropoutKey.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "smp-pack-attention"

namespace smp {
#define GEN_PASS_DEF_SMPPACKATTENTIONPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// What a split of a projection into q, k and v feeds, when every use
/// fits: its head views, the attention ops reading them, and per backward
/// op the concatenation of its gradients (with their views).
struct Packing {
  SplitOp split;
  int64_t qHeads = 0, kvHeads = 0, headDim = 0;
  SmallVector<Operation *> views; // the split results' [B, S, H, D] views
  llvm::SetVector<AttentionOp> forward;
  llvm::SetVector<AttentionGradOp> backward;
  SmallVector<ConcatOp> concats; // backward[i]'s
};

/// The head views of split result i: reshapes to [B, S, H, D] (one H and D
/// for all of them); false when another op reads the result.
bool collectViews(Packing &p, int i, int64_t &heads, int64_t &dim) {
  ArrayRef<int64_t> in = shapeOf(p.split.getInput());
  for (Operation *user : p.split.getResult(i).getUsers()) {
    auto view = dyn_cast<ReshapeOp>(user);
    if (!view)
      return false;
    ArrayRef<int64_t> s = shapeOf(view.getResult());
    if (s.size() != 4 || s[0] != in[0] || s[1] != in[1] ||
        (heads && (s[2] != heads || s[3] != dim)))
      return false;
    heads = s[2];
    dim = s[3];
    p.views.push_back(view);
  }
  return heads > 0;
}

/// Whether `v` is a view of split result `i`.
bool isViewOf(Value v, SplitOp split, unsigned i) {
  auto view = v.getDefiningOp<ReshapeOp>();
  return view && view.getInput() == split.getResult(i);
}

/// Whether the attention op reads the views of the split's results 0, 1 and
/// 2 as its query, key and value (and nothing else of them).
template <typename AttnOp> bool readsSplit(AttnOp op, SplitOp split) {
  if (!op.getBshd() || !isViewOf(op.getQuery(), split, 0) ||
      !isViewOf(op.getKey(), split, 1) || !isViewOf(op.getValue(), split, 2))
    return false;
  Value mask = op.getMask();
  auto maskView = mask ? mask.getDefiningOp<ReshapeOp>() : ReshapeOp();
  return !maskView || maskView.getInput().getDefiningOp() != split;
}

/// The concatenation (axis 2) of the views of dq, dk and dv, in that order,
/// each read only there: the projection's gradient.
ConcatOp gradientConcat(AttentionGradOp grad, SplitOp split) {
  ConcatOp concat;
  for (auto [i, g] : llvm::enumerate(grad.getResults())) {
    if (!g.hasOneUse())
      return {};
    auto view = dyn_cast<ReshapeOp>(*g.getUsers().begin());
    if (!view || view.getType() != split.getResult(i).getType() ||
        !view.getResult().hasOneUse())
      return {};
    auto c = dyn_cast<ConcatOp>(*view.getResult().getUsers().begin());
    if (!c || (concat && c != concat) || c.getAxis() != 2 ||
        c.getInputs().size() != 3 || c.getInputs()[i] != view.getResult())
      return {};
    concat = c;
  }
  return concat;
}

/// The packing of `split`, or nothing when it is not q, k and v of one
/// projection that only attention ops read.
std::optional<Packing> match(SplitOp split) {
  Packing p;
  p.split = split;
  ArrayRef<int64_t> in = shapeOf(split.getInput());
  if (in.size() != 3 || split.getAxis() != 2 || split.getNumResults() != 3)
    return std::nullopt;
  int64_t heads[3] = {0, 0, 0}, dims[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i)
    if (!collectViews(p, i, heads[i], dims[i]))
      return std::nullopt;
  if (dims[1] != dims[0] || dims[2] != dims[0] || heads[1] != heads[2] ||
      heads[0] % heads[1] != 0)
    return std::nullopt;
  p.qHeads = heads[0];
  p.kvHeads = heads[1];
  p.headDim = dims[0];
  for (Operation *view : p.views)
    for (Operation *user : view->getUsers()) {
      if (auto fwd = dyn_cast<AttentionOp>(user);
          fwd && readsSplit(fwd, split)) {
        p.forward.insert(fwd);
      } else if (auto bwd = dyn_cast<AttentionGradOp>(user);
                 bwd && readsSplit(bwd, split)) {
        p.backward.insert(bwd);
      } else {
        return std::nullopt;
      }
    }
  for (AttentionGradOp bwd : p.backward) {
    ConcatOp concat = gradientConcat(bwd, split);
    if (!concat)
      return std::nullopt;
    p.concats.push_back(concat);
  }
  return p;
}

/// `to` takes `from`'s annotations (stage, micro-batch, backward marks).
void annotateLike(Operation *to, Operation *from) {
  to->setDiscardableAttrs(from->getDiscardableAttrDictionary());
}

void pack(Packing &p) {
  SplitOp split = p.split;
  OpBuilder b(split);
  b.setInsertionPointAfter(split);
  ArrayRef<int64_t> in = shapeOf(split.getInput());
  auto qkvType =
      RankedTensorType::get({in[0], in[1], p.qHeads + 2 * p.kvHeads, p.headDim},
                            split.getInput().getType().getElementType());
  auto qkv = ReshapeOp::create(b, split.getLoc(), qkvType, split.getInput());
  annotateLike(qkv, split);
  IntegerAttr kv = b.getI64IntegerAttr(p.kvHeads);
  for (AttentionOp fwd : p.forward) {
    b.setInsertionPoint(fwd);
    auto packed =
        PackedAttentionOp::create(b, fwd.getLoc(), qkv, fwd.getMask(),
                                  fwd.getScaleAttr(), fwd.getCausalAttr(), kv);
    annotateLike(packed, fwd);
    copyDropoutKey(fwd, packed);
    fwd.replaceAllUsesWith(packed.getResults());
    fwd.erase();
  }
  for (auto [i, constBwd] : llvm::enumerate(p.backward)) {
    AttentionGradOp bwd = constBwd;
    ConcatOp concat = p.concats[i];
    b.setInsertionPoint(bwd);
    auto packed = PackedAttentionGradOp::create(
        b, bwd.getLoc(), qkv, bwd.getOutput(), bwd.getLse(), bwd.getGrad(),
        bwd.getMask(), bwd.getScaleAttr(), bwd.getCausalAttr(), kv);
    annotateLike(packed, bwd);
    copyDropoutKey(bwd, packed);
    b.setInsertionPoint(concat);
    auto grad = ReshapeOp::create(b, concat.getLoc(), concat.getType(),
                                  packed.getQkvGrad());
    annotateLike(grad, concat);
    concat.replaceAllUsesWith(grad.getResult());
    SmallVector<Operation *> views;
    for (Value g : concat.getInputs())
      views.push_back(g.getDefiningOp());
    concat.erase();
    for (Operation *view : views)
      view->erase();
    bwd.erase();
  }
  for (Operation *view : p.views)
    view->erase();
  split.erase();
}

struct SmpPackAttentionPass
    : public smp::impl::SmpPackAttentionPassBase<SmpPackAttentionPass> {
  void runOnOperation() override {
    SmallVector<Packing> packings;
    getOperation().walk([&](SplitOp split) {
      if (auto p = match(split))
        packings.push_back(std::move(*p));
    });
    for (Packing &p : packings)
      pack(p);
  }
};

} // namespace
