//===- Attention.cpp - Fused scaled-dot-product attention, forward --------===//
//
// FlashAttention-2's forward: each task is one block of kBr queries of one
// (batch, head); it walks the key blocks of kBc keys keeping each query's
// running max m and sum l of exp(score - m) (online softmax), rescaling its
// output accumulator when m grows, so the S x Sk scores exist one kBr x kBc
// block at a time. Key blocks that no query of the block may attend (above
// the causal diagonal, or all false / -inf in the mask) are skipped. Scores
// and P.v are register-blocked products (AttentionBlocks.h), exp is
// VecMath's. A dropout on the probabilities scales each exp(score - m) by
// its mask factor after it joins the running sum l and before P.v (the mask
// of P's global index, drawn a row of keys at a time). Semantics:
// KernelApi.inc, "Attention".
//
//===----------------------------------------------------------------------===//

#include "AttentionBlocks.h"
#include "VecMath.h"

namespace smp::kernels::cpu {
using namespace detail;
using namespace detail::attn;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// One task's buffers: the score tile, the output accumulator, zeros.
struct ForwardTile {
  std::vector<float> s, o, zeros;
  float m[kBr];
  double l[kBr];
  ForwardTile(const common::AttentionDims &g, int64_t dvPad)
      : s(static_cast<size_t>(kBr * kBc)), o(static_cast<size_t>(kBr * dvPad)),
        zeros(static_cast<size_t>(std::max({g.d, g.dv, kBr, kBc})), 0.0f) {}
};

/// Turns row r of the score tile into exp(score - m_new) (in place, 0 where
/// not allowed), updating m, l and the output accumulator's row r.
void onlineSoftmaxRow(ForwardTile &t, int64_t r, int64_t bc, int64_t dvPad) {
  float *row = t.s.data() + r * kBc;
  float mNew = std::max(t.m[r], vecMax(row, bc));
  if (mNew == kNegInf) { // nothing allowed so far
    std::fill_n(row, bc, 0.0f);
    return;
  }
  double sum = vecExpSum(row, row, bc, mNew);
  float corr = t.m[r] == kNegInf ? 0.0f : std::exp(t.m[r] - mNew);
  t.l[r] = t.l[r] * corr + sum;
  t.m[r] = mNew;
  if (corr != 1.0f) {
    float *o = t.o.data() + r * dvPad;
    for (int64_t c = 0; c < dvPad; ++c)
      o[c] *= corr;
  }
}

/// Query block `task` (of (b, h) = task / nQb): out rows and lse.
template <class S>
void forwardBlock(const Operands &in, int64_t task, S *out, float *lse) {
  const common::AttentionDims &g = *in.g;
  int64_t bh = task / in.nQb, b = bh / g.hq, h = bh % g.hq;
  int64_t i0 = task % in.nQb * kBr, br = std::min(kBr, g.s - i0);
  int64_t kvh = h / g.group, dvPad = roundUp(g.dv, kNR);
  ForwardTile t(g, dvPad);
  std::fill_n(t.m, kBr, kNegInf);
  std::fill_n(t.l, kBr, 0.0);
  const float *vHead = in.v.p + in.kRow(b, kvh, 0) * in.v.ld;
  for (int64_t kb = 0; kb <= in.sc.lastKeyBlock(i0, br, in.nKb); ++kb) {
    int64_t j0 = kb * kBc, bc = std::min(kBc, g.sk - j0);
    if (!in.sc.anyAllowed(b, h, i0, br, j0, bc))
      continue;
    in.scores(b, h, i0, br, kb, t.s.data(), t.zeros.data());
    for (int64_t r = 0; r < br; ++r) {
      onlineSoftmaxRow(t, r, bc, dvPad);
      // Dropout: l sums the kept and the dropped alike (the softmax's
      // denominator); only P v sees the mask.
      if (in.dropout) {
        float z[kBc], *row = t.s.data() + r * kBc;
        in.dropFactors(in.qRow(b, h, i0 + r), j0, bc, z);
        for (int64_t c = 0; c < bc; ++c)
          row[c] *= z[c];
      }
    }
    // o += P v over the block's keys.
    gemmRows(br, dvPad, bc, t.s.data(), kBc, t.zeros.data(),
             vHead + j0 * in.v.ld, in.v.ld, kNR, t.o.data(), dvPad, true);
  }
  for (int64_t r = 0; r < br; ++r) {
    int64_t row = in.qRow(b, h, i0 + r);
    S *o = out + row * g.dv;
    if (t.l[r] == 0) { // no allowed key
      std::fill_n(o, g.dv, Float<S>::store(0.0f));
      lse[2 * row] = lse[2 * row + 1] = kNegInf;
      continue;
    }
    float inv = static_cast<float>(1.0 / t.l[r]);
    for (int64_t c = 0; c < g.dv; ++c)
      o[c] = Float<S>::store(t.o[r * dvPad + c] * inv);
    // m is an f32 score; log l apart (their f32 sum would round m's bits).
    lse[2 * row] = t.m[r];
    lse[2 * row + 1] = static_cast<float>(std::log(t.l[r]));
  }
}

} // namespace

Status attention(const TensorRef &q, const TensorRef &k, const TensorRef &v,
                 const TensorRef *mask, float scale, bool causal,
                 const TensorRef &out, const TensorRef &lse, bool bshd,
                 const DropoutKey *dropout) {
  common::AttentionDims g;
  g.bshd = bshd;
  SMP_RETURN_IF_ERROR(common::checkAttention(q, k, v, mask, out, lse, g));
  common::DropoutPlan drop;
  bool drops = common::attentionDrops(dropout);
  if (drops)
    SMP_RETURN_IF_ERROR(
        common::planAttentionDropout("attention", *dropout, g, drop));
  if (bshd) {
    HeadsFirst hf;
    TensorRef o = hf.scratchFor(out);
    SMP_RETURN_IF_ERROR(attention(hf.copy(q), hf.copy(k), hf.copy(v), mask,
                                  scale, causal, o, lse, false, dropout));
    HeadsFirst::writeBack(o, out);
    return Status::success();
  }
  if (lse.numel() == 0)
    return Status::success();
  return visitFloat(q.dtype, "attention", [&](auto tag) {
    using S = typename decltype(tag)::type;
    Operands in =
        scoreOperands<S>(g, q, k, mask, scale, causal, drops ? &drop : nullptr);
    widenRows<S>(v, g.dv, in.v);
    S *o = out.as<S>();
    float *l = lse.as<float>();
    forTasks(g.b * g.hq * in.nQb,
             [&](int64_t task) { forwardBlock<S>(in, task, o, l); });
    return Status::success();
  });
}

Status packedAttention(const TensorRef &qkv, int64_t kvHeads,
                       const TensorRef *mask, float scale, bool causal,
                       const TensorRef &out, const TensorRef &lse,
                       const DropoutKey *dropout) {
  common::AttentionDims g;
  SMP_RETURN_IF_ERROR(
      common::checkPackedAttention(qkv, kvHeads, mask, out, lse, g));
  common::PackedViews in = common::packedViews(qkv, g);
  HeadsFirst hf;
  TensorRef o = hf.scratchFor(out);
  SMP_RETURN_IF_ERROR(attention(hf.copy(in.q, g.qkvLd), hf.copy(in.k, g.qkvLd),
                                hf.copy(in.v, g.qkvLd), mask, scale, causal, o,
                                lse, false, dropout));
  HeadsFirst::writeBack(o, out);
  return Status::success();
}

} // namespace smp::kernels::cpu
