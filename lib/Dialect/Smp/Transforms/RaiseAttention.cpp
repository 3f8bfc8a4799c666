//===- RaiseAttention.cpp - Fuse attention chains into smp.attention ------===//
//
// Implements `smp-raise-attention` (see Passes.td). The pattern is rooted at
// the product of the probabilities with v and walks inwards: a dropout on
// the probabilities (the op's own, drawing the same mask), the NaN guard
// of a fully masked row, the softmax over the keys, masks and scales in any
// order as long as no scale is applied to a mask, and the scores' product,
// whose operands may carry the scale themselves.
//
//===----------------------------------------------------------------------===//

#include "CausalMask.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "smp/Dialect/Smp/Autodiff/GradientUtils.h"
#include "smp/Dialect/Smp/IR/DropoutKey.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>

namespace smp {
#define GEN_PASS_DEF_SMPRAISEATTENTIONPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// x when `v` is the export's guard `where(not(equal(x, x)), 0, x)` (a fully
/// masked row's NaN probabilities become 0, which smp.attention gives).
Value matchNanGuard(Value v) {
  auto w = v.getDefiningOp<WhereOp>();
  if (!w || !isSplatConstant(w.getLhs(), 0.0))
    return {};
  auto notOp = w.getCondition().getDefiningOp<NotOp>();
  auto eq = notOp ? notOp.getInput().getDefiningOp<EqualOp>() : EqualOp();
  Value x = w.getRhs();
  if (!eq || eq.getLhs() != x || eq.getRhs() != x)
    return {};
  return x;
}

/// A splat constant -inf.
bool isMinusInfinity(Value v) {
  auto c = getSplatConstant(v);
  return c && std::isinf(*c) && *c < 0;
}

/// What the walk from the softmax to the scores' product collects.
struct Chain {
  double scale = 1.0;
  SmallVector<Value> additive; // float masks added to the scores
  /// i1 masks and whether each is true where a key is masked out (written
  /// `where(masked, -inf, s)`) rather than where it takes part.
  SmallVector<std::pair<Value, bool>> keep;
};

/// Walks from the softmax's input to the scores' product through masks and
/// scales; returns the product (null when the chain has another form).
MatMulOp walkScores(Value s, Chain &chain) {
  ArrayRef<int64_t> full = typeOf(s).getShape();
  while (true) {
    if (!s.hasOneUse() || typeOf(s).getShape() != full)
      return {};
    Operation *def = s.getDefiningOp();
    if (!def)
      return {};
    if (auto mm = dyn_cast<MatMulOp>(def))
      return mm;
    // The walk goes from the softmax inwards: a mask met after a scale is
    // applied before it, and the scale would apply to the mask too.
    bool scaled = chain.scale != 1.0;
    if (isa<AddOp, WhereOp>(def) && scaled)
      return {};
    if (auto add = dyn_cast<AddOp>(def)) {
      // The scores are the operand of the full shape; the other is a mask.
      bool lhsScores = typeOf(add.getLhs()).getShape() == full;
      Value scores = lhsScores ? add.getLhs() : add.getRhs();
      Value mask = lhsScores ? add.getRhs() : add.getLhs();
      if (typeOf(scores).getShape() != full || mask == scores)
        return {};
      chain.additive.push_back(mask);
      s = scores;
    } else if (auto w = dyn_cast<WhereOp>(def)) {
      bool maskedOut = isMinusInfinity(w.getLhs()); // where(out, -inf, s)
      if (!maskedOut && !isMinusInfinity(w.getRhs())) // where(in, s, -inf)
        return {};
      chain.keep.push_back({w.getCondition(), maskedOut});
      s = maskedOut ? w.getRhs() : w.getLhs();
    } else if (isa<MulOp, DivOp>(def)) {
      Value l = def->getOperand(0), r = def->getOperand(1);
      bool div = isa<DivOp>(def);
      auto c = getSplatConstant(r);
      Value x = l;
      if (!c && !div) {
        c = getSplatConstant(l);
        x = r;
      }
      if (!c || *c == 0 || !std::isfinite(*c))
        return {};
      chain.scale *= div ? 1.0 / *c : *c;
      s = x;
    } else {
      return {};
    }
  }
}

} // namespace

namespace {

using autodiff::Grad;

/// Strips a splat constant factor off an operand of the scores' product
/// (the export scales q and k by sqrt(scale) each), folding it into `scale`.
Value stripScale(Value x, double &scale) {
  auto mul = x.getDefiningOp<MulOp>();
  if (!mul || typeOf(mul.getResult()) != typeOf(x))
    return x;
  for (auto [v, c] : {std::pair{mul.getLhs(), mul.getRhs()},
                      {mul.getRhs(), mul.getLhs()}}) {
    auto f = getSplatConstant(c);
    if (f && std::isfinite(*f) && *f != 0 && typeOf(v) == typeOf(x)) {
      scale *= *f;
      return v;
    }
  }
  return x;
}

/// k [B, H, Sk, D] from k^T [B, H, D, Sk]: the transpose's input when k^T is
/// a transpose (or the export's reshape to [B*H, Sk, D], swap, reshape back)
/// of it; otherwise a new transpose.
Value untransposeKey(Grad &G, Value kT) {
  auto t = typeOf(kT);
  SmallVector<int64_t> kShape(t.getShape());
  std::swap(kShape[2], kShape[3]);
  if (auto tr = kT.getDefiningOp<TransposeOp>()) {
    SmallVector<int64_t> perm(tr.getPerm());
    std::swap(perm[2], perm[3]);
    if (llvm::equal(perm, llvm::seq<int64_t>(0, 4)))
      return tr.getInput();
    return TransposeOp::create(G.b, G.loc, tr.getInput(),
                               G.b.getDenseI64ArrayAttr(perm));
  }
  if (auto outer = kT.getDefiningOp<ReshapeOp>()) {
    auto tr = outer.getInput().getDefiningOp<TransposeOp>();
    auto inner = tr ? tr.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
    int64_t bh = kShape[0] * kShape[1];
    if (inner && llvm::equal(tr.getPerm(), ArrayRef<int64_t>{0, 2, 1}) &&
        typeOf(inner.getResult()).getShape() ==
            ArrayRef<int64_t>{bh, kShape[2], kShape[3]})
      return G.reshape(inner.getInput(), kShape);
  }
  return TransposeOp::create(G.b, G.loc, kT,
                             G.b.getDenseI64ArrayAttr({0, 1, 3, 2}));
}

/// x [B, Hkv, S, D] when `v` [B, Hkv * G, S, D] is Hugging Face's repeat_kv
/// of it (grouped-query attention): reshape to [B, Hkv, 1, S, D], expand to
/// [B, Hkv, G, S, D], reshape back. Query head h then reads key/value head
/// h / G, which is what smp.attention does with fewer key/value heads, so
/// the op reads x and never materialises the G copies. Null otherwise (a
/// repeat along another dim, h % Hkv, is not this pairing).
Value matchRepeatKv(Value v) {
  auto outer = v.getDefiningOp<ReshapeOp>();
  auto ex = outer ? outer.getInput().getDefiningOp<ExpandOp>() : ExpandOp();
  auto inner = ex ? ex.getInput().getDefiningOp<ReshapeOp>() : ReshapeOp();
  if (!inner || typeOf(inner.getInput()).getRank() != 4)
    return {};
  Value x = inner.getInput();
  ArrayRef<int64_t> xs = typeOf(x).getShape(), es = typeOf(ex).getShape();
  if (es.size() != 5)
    return {};
  int64_t b = xs[0], h = xs[1], s = xs[2], d = xs[3], g = es[2];
  if (typeOf(inner.getResult()).getShape() !=
          ArrayRef<int64_t>{b, h, 1, s, d} ||
      es != ArrayRef<int64_t>{b, h, g, s, d} ||
      typeOf(v).getShape() != ArrayRef<int64_t>{b, h * g, s, d})
    return {};
  return x;
}

/// `m`'s shape as rank 4 (leading 1s), if each dim is 1 or that of `full`.
std::optional<SmallVector<int64_t>> maskShape(Value m,
                                              ArrayRef<int64_t> full) {
  auto t = typeOf(m);
  if (t.getRank() > 4)
    return std::nullopt;
  SmallVector<int64_t> shape(4 - t.getRank(), 1);
  llvm::append_range(shape, t.getShape());
  for (int i = 0; i < 4; ++i)
    if (shape[i] != 1 && shape[i] != full[i])
      return std::nullopt;
  return shape;
}

/// Whether every mask of the chain fits the fused op: broadcastable to
/// `full`, float masks of the scores' type (a trainable one, T5's relative
/// position bias, gets its gradient from smp.attention_mask_grad).
bool masksFit(const Chain &chain, ArrayRef<int64_t> full, Type elementType) {
  for (auto [cond, maskedOut] : chain.keep)
    if (!maskShape(cond, full))
      return false;
  for (Value m : chain.additive)
    if (!maskShape(m, full) || typeOf(m).getElementType() != elementType)
      return false;
  return true;
}

/// `v`, or the result of an op equal to v's (same name, operands, attributes
/// and types) elsewhere in its block, the new one erased: every layer's
/// attention reads the same causal mask, which must be reshaped and inverted
/// once, not once per layer (at 2048 tokens, 4 MiB each). An equal op later
/// in the block (the driver may raise the last layer first) moves up to the
/// new one's place, where its operands, being the same, are defined.
Value reuseEqual(PatternRewriter &rewriter, Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || op->getNumOperands() == 0)
    return v;
  for (Operation *user : op->getOperand(0).getUsers()) {
    if (user == op || user->getBlock() != op->getBlock() ||
        !OperationEquivalence::isEquivalentTo(
            user, op, OperationEquivalence::IgnoreLocations))
      continue;
    if (op->isBeforeInBlock(user))
      rewriter.moveOpBefore(user, op);
    rewriter.eraseOp(op);
    return user->getResult(0);
  }
  return v;
}

/// Removes the chain's masks that are exactly the causal one over [s, s]
/// (what attends is key j <= query i); returns whether there was one. Such a
/// mask becomes `causal = true`: nothing to read, half the blocks skipped.
bool dropCausalMasks(Chain &chain, int64_t s) {
  auto overScores = [&](Value m) {
    return typeOf(m).getShape().take_back(2) == ArrayRef<int64_t>{s, s};
  };
  auto isCausal = [&](Value m, double below, double above) {
    auto v = overScores(m) ? causalValues(m) : std::nullopt;
    return v && v->below == below && v->above == above;
  };
  size_t before = chain.keep.size() + chain.additive.size();
  llvm::erase_if(chain.keep, [&](const std::pair<Value, bool> &k) {
    // where(masked, -inf, s) masks j > i; where(keep, s, -inf) keeps j <= i.
    return k.second ? isCausal(k.first, 0, 1) : isCausal(k.first, 1, 0);
  });
  llvm::erase_if(chain.additive,
                 [&](Value m) { return isCausal(m, 0, -INFINITY); });
  return chain.keep.size() + chain.additive.size() < before;
}

/// One mask from the chain's (which fit): the i1 ones and-ed, the float ones
/// added, and both as where(keep, added, -inf); null when there is none.
Value buildMask(Grad &G, PatternRewriter &rewriter, const Chain &chain,
                ArrayRef<int64_t> full) {
  auto build = [&](Value v) { return reuseEqual(rewriter, v); };
  Value keep, added;
  for (auto [cond, maskedOut] : chain.keep) {
    Value c = build(G.reshape(cond, *maskShape(cond, full)));
    if (maskedOut)
      c = build(NotOp::create(G.b, G.loc, c));
    keep = keep ? build(AndOp::create(G.b, G.loc, keep, c)) : c;
  }
  for (Value m : chain.additive) {
    Value a = build(G.reshape(m, *maskShape(m, full)));
    added = added ? build(AddOp::create(G.b, G.loc, added, a)) : a;
  }
  if (keep && added)
    return build(WhereOp::create(G.b, G.loc, keep, added,
                                 G.scalar(added, -INFINITY)));
  return keep ? keep : added;
}

struct RaiseAttention : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatMulOp pv,
                                PatternRewriter &rewriter) const override {
    if (pv.getTransposeLhs() || pv.getTransposeRhs() ||
        typeOf(pv.getResult()).getRank() != 4)
      return rewriter.notifyMatchFailure(pv, "not a rank-4 p v product");
    Value p = pv.getLhs(), v = pv.getRhs();
    // A dropout on the probabilities becomes the op's: its kernels draw the
    // same mask (the same key over the [B, Hq, S, Sk] probabilities).
    Operation *consumer = pv;
    auto drop = p.getDefiningOp<DropoutOp>();
    if (drop) {
      if (!drop->hasOneUse())
        return rewriter.notifyMatchFailure(pv, "dropped probabilities reused");
      consumer = drop;
      p = drop.getInput();
    }
    Value guarded = matchNanGuard(p);
    auto sm = (guarded ? guarded : p).getDefiningOp<SoftmaxOp>();
    if (!sm || (sm.getAxis() != 3 && sm.getAxis() != -1))
      return rewriter.notifyMatchFailure(pv, "no softmax over the keys");
    // The probabilities feed only this product or its dropout (and the
    // guard).
    Value probs = sm.getResult();
    for (Operation *user : probs.getUsers())
      if (user != consumer &&
          !(guarded && (isa<EqualOp>(user) || user == p.getDefiningOp())))
        return rewriter.notifyMatchFailure(pv, "probabilities used elsewhere");
    if (guarded && !p.hasOneUse())
      return rewriter.notifyMatchFailure(pv, "guarded probabilities reused");
    Chain chain;
    MatMulOp qk = walkScores(sm.getInput(), chain);
    if (!qk || qk.getTransposeLhs())
      return rewriter.notifyMatchFailure(pv, "no q k^T product");
    Value q = stripScale(qk.getLhs(), chain.scale);
    Value kOrKT = stripScale(qk.getRhs(), chain.scale);
    auto qt = typeOf(q), vt = typeOf(v);
    if (qt.getRank() != 4 || typeOf(kOrKT).getRank() != 4 ||
        vt.getRank() != 4 || vt.getElementType() != qt.getElementType())
      return rewriter.notifyMatchFailure(pv, "operands are not rank 4");
    // The kernels compute in f32 (f16 and bf16 widened to it): an f64 model
    // keeps its attention unfused, computed in f64.
    if (qt.getElementType().isF64())
      return rewriter.notifyMatchFailure(pv, "f64 attention stays unfused");
    // Every check before the first op is built: a pattern that fails must
    // leave the IR as it was.
    SmallVector<int64_t> ks(typeOf(kOrKT).getShape());
    if (!qk.getTransposeRhs())
      std::swap(ks[2], ks[3]);
    ArrayRef<int64_t> qs = qt.getShape(), vs = vt.getShape();
    if (ks[0] != qs[0] || vs[0] != qs[0] || ks[3] != qs[3] ||
        vs[1] != ks[1] || vs[2] != ks[2] || ks[1] == 0 || qs[1] % ks[1] != 0)
      return rewriter.notifyMatchFailure(pv, "shapes broadcast");
    int64_t full[4] = {qs[0], qs[1], qs[2], ks[2]};
    bool causal = qs[2] == ks[2] && dropCausalMasks(chain, qs[2]);
    if (!masksFit(chain, full, qt.getElementType()))
      return rewriter.notifyMatchFailure(pv, "a mask does not fit");
    rewriter.setInsertionPoint(pv);
    Grad G{rewriter, pv.getLoc()};
    Value k = qk.getTransposeRhs() ? kOrKT : untransposeKey(G, kOrKT);
    // Grouped-query attention: the op reads the key/value heads themselves.
    Value kvK = matchRepeatKv(k), kvV = matchRepeatKv(v);
    if (kvK && kvV && typeOf(kvK).getDimSize(1) == typeOf(kvV).getDimSize(1)) {
      k = kvK;
      v = kvV;
    }
    Value mask = buildMask(G, rewriter, chain, full);
    auto attn = AttentionOp::create(
        rewriter, pv.getLoc(), q, k, v, mask,
        rewriter.getF32FloatAttr(static_cast<float>(chain.scale)),
        rewriter.getBoolAttr(causal));
    if (drop)
      copyDropoutKey(drop, attn);
    rewriter.replaceOp(pv, attn.getResult());
    return success();
  }
};

struct SmpRaiseAttentionPass
    : public smp::impl::SmpRaiseAttentionPassBase<SmpRaiseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseAttention>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
