//===- AttentionGrad.cpp - Fused scaled-dot-product attention, backward ---===//
//
// FlashAttention-2's backward, the probabilities recomputed from the saved
// log-sum-exp: P = exp(score - lse), dP = dout v^T, dS = P (dP - Dsum) with
// Dsum_i = dout_i . out_i. Two parallel passes, so that every gradient
// element is summed by one task in a fixed order and the result does not
// depend on the thread count (no atomics, no per-thread partial sums):
//
//   1. one task per (batch, key/value head, key block): dv += P^T dout and
//      dk += dS^T q over every query block of every query head of the group;
//   2. one task per (batch, query head, query block): dq += dS k over the
//      key blocks.
//
// Both passes recompute P and dS with the same code on the same packed
// operands as the forward (the same bits). Semantics: KernelApi.inc.
//
//===----------------------------------------------------------------------===//

#include "AttentionBlocks.h"
#include "VecMath.h"

namespace smp::kernels::cpu {
using namespace detail;
using namespace detail::attn;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kBcRows = roundUp(kBc, kMR);

/// One task's buffers: P and dS tiles [kBr][kBc], their transposes
/// [kBcRows][kBr], the gradient accumulator and zeros.
struct GradTile {
  std::vector<float> p, ds, pt, dst, acc, acc2, zeros;
  GradTile(const common::AttentionDims &g, int64_t accFloats,
           int64_t acc2Floats)
      : p(static_cast<size_t>(kBr * kBc)), ds(p.size()),
        pt(static_cast<size_t>(kBcRows * kBr)), dst(pt.size()),
        acc(static_cast<size_t>(accFloats)),
        acc2(static_cast<size_t>(acc2Floats)),
        zeros(static_cast<size_t>(std::max({g.d, g.dv, kBr, kBc})), 0.0f) {}
};

/// P and dS of query rows [i0, i0 + br) of head (b, h) against key block
/// kb, into t.p and t.ds (row stride kBc; columns from the block's key
/// count on are not written).
void probsAndDs(const Operands &in, int64_t b, int64_t h, int64_t i0,
                int64_t br, int64_t kb, GradTile &t) {
  const common::AttentionDims &g = *in.g;
  int64_t kvh = h / g.group, bc = std::min(kBc, g.sk - kb * kBc);
  in.scores(b, h, i0, br, kb, t.p.data(), t.zeros.data());
  int64_t q0 = in.qRow(b, h, i0);
  for (int64_t r = 0; r < br; ++r) {
    float *row = t.p.data() + r * kBc, l = in.lse[q0 + r];
    if (l == kNegInf) // no allowed key: P is 0
      std::fill_n(row, bc, 0.0f);
    else
      vecExpSum(row, row, bc, l);
  }
  const float *vp = in.vp.data() + in.kBlock(b, kvh, kb) * blockFloats(g.dv);
  gemmRows(br, kBc, g.dv, in.dout.p + q0 * in.dout.ld, in.dout.ld,
           t.zeros.data(), vp, kNR, g.dv * kNR, t.ds.data(), kBc, false);
  for (int64_t r = 0; r < br; ++r) {
    float dsum = in.dsum[q0 + r];
    float *p = t.p.data() + r * kBc, *ds = t.ds.data() + r * kBc;
    for (int64_t c = 0; c < bc; ++c)
      ds[c] = p[c] * (ds[c] - dsum);
  }
}

/// dst[c][r] = src[r][c] for r < br, c < bc (src stride kBc, dst kBr).
void transposeTile(const float *src, int64_t br, int64_t bc, float *dst) {
  for (int64_t r = 0; r < br; ++r)
    for (int64_t c = 0; c < bc; ++c)
      dst[c * kBr + r] = src[r * kBc + c];
}

/// Pass 1, task (b, kvh, kb): dk and dv of the key block.
template <class S>
void keyBlockGrads(const Operands &in, int64_t task, S *dk, S *dv) {
  const common::AttentionDims &g = *in.g;
  int64_t bkv = task / in.nKb, b = bkv / g.hkv, kvh = bkv % g.hkv;
  int64_t kb = task % in.nKb, j0 = kb * kBc, bc = std::min(kBc, g.sk - j0);
  int64_t dPad = roundUp(g.d, kNR), dvPad = roundUp(g.dv, kNR);
  GradTile t(g, kBcRows * dPad, kBcRows * dvPad); // acc: dk, acc2: dv
  for (int64_t h = kvh * g.group; h < (kvh + 1) * g.group; ++h)
    for (int64_t qb = in.sc.causal ? j0 / kBr : 0; qb < in.nQb; ++qb) {
      int64_t i0 = qb * kBr, br = std::min(kBr, g.s - i0);
      if (!in.sc.anyAllowed(b, h, i0, br, j0, bc))
        continue;
      probsAndDs(in, b, h, i0, br, kb, t);
      transposeTile(t.p.data(), br, bc, t.pt.data());
      transposeTile(t.ds.data(), br, bc, t.dst.data());
      int64_t q0 = in.qRow(b, h, i0);
      gemmRows(bc, dvPad, br, t.pt.data(), kBr, t.zeros.data(),
               in.dout.p + q0 * in.dout.ld, in.dout.ld, kNR, t.acc2.data(),
               dvPad, true);
      gemmRows(bc, dPad, br, t.dst.data(), kBr, t.zeros.data(),
               in.q.p + q0 * in.q.ld, in.q.ld, kNR, t.acc.data(), dPad, true);
    }
  float scale = in.sc.scale;
  for (int64_t c = 0; c < bc; ++c) {
    int64_t row = in.kRow(b, kvh, j0 + c);
    for (int64_t p = 0; p < g.d; ++p)
      dk[row * g.d + p] = Float<S>::store(scale * t.acc[c * dPad + p]);
    for (int64_t p = 0; p < g.dv; ++p)
      dv[row * g.dv + p] = Float<S>::store(t.acc2[c * dvPad + p]);
  }
}

/// Pass 2, task (b, h, qb): dq of the query block.
template <class S>
void queryBlockGrad(const Operands &in, int64_t task, S *dq) {
  const common::AttentionDims &g = *in.g;
  int64_t bh = task / in.nQb, b = bh / g.hq, h = bh % g.hq;
  int64_t i0 = task % in.nQb * kBr, br = std::min(kBr, g.s - i0);
  int64_t kvh = h / g.group, dPad = roundUp(g.d, kNR);
  GradTile t(g, kBr * dPad, 0);
  for (int64_t kb = 0; kb <= in.sc.lastKeyBlock(i0, br, in.nKb); ++kb) {
    int64_t j0 = kb * kBc, bc = std::min(kBc, g.sk - j0);
    if (!in.sc.anyAllowed(b, h, i0, br, j0, bc))
      continue;
    probsAndDs(in, b, h, i0, br, kb, t);
    gemmRows(br, dPad, bc, t.ds.data(), kBc, t.zeros.data(),
             in.k.p + in.kRow(b, kvh, j0) * in.k.ld, in.k.ld, kNR, t.acc.data(),
             dPad, true);
  }
  float scale = in.sc.scale;
  for (int64_t r = 0; r < br; ++r) {
    S *o = dq + in.qRow(b, h, i0 + r) * g.d;
    for (int64_t p = 0; p < g.d; ++p)
      o[p] = Float<S>::store(scale * t.acc[r * dPad + p]);
  }
}

/// Dsum_i = dout_i . out_i, summed in double.
template <class S>
std::vector<float> rowDots(const TensorRef &out, const TensorRef &dout,
                           int64_t rows, int64_t n) {
  std::vector<float> d(static_cast<size_t>(rows));
  const S *o = out.as<S>(), *g = dout.as<S>();
  parallelFor(rows, grainFor(n), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      double s = 0;
      for (int64_t c = 0; c < n; ++c)
        s += double(Float<S>::load(o[i * n + c])) *
             double(Float<S>::load(g[i * n + c]));
      d[i] = static_cast<float>(s);
    }
  });
  return d;
}

} // namespace

Status attentionGrad(const TensorRef &q, const TensorRef &k, const TensorRef &v,
                     const TensorRef &out, const TensorRef &lse,
                     const TensorRef &dout, const TensorRef *mask, float scale,
                     bool causal, const TensorRef &dq, const TensorRef &dk,
                     const TensorRef &dv) {
  common::AttentionDims g;
  SMP_RETURN_IF_ERROR(
      common::checkAttentionGrad(q, k, v, out, lse, dout, mask, dq, dk, dv, g));
  return visitFloat(q.dtype, "attention_grad", [&](auto tag) {
    using S = typename decltype(tag)::type;
    Operands in = scoreOperands<S>(g, q, k, mask, scale, causal);
    widenRows<S>(k, g.d, in.k);
    packPanels<S>(v, g.b * g.hkv, g.sk, g.dv, in.vp);
    widenRows<S>(dout, g.dv, in.dout);
    in.lse = lse.as<float>();
    in.dsum = rowDots<S>(out, dout, g.b * g.hq * g.s, g.dv);
    S *pdk = dk.as<S>(), *pdv = dv.as<S>(), *pdq = dq.as<S>();
    forTasks(g.b * g.hkv * in.nKb,
             [&](int64_t task) { keyBlockGrads<S>(in, task, pdk, pdv); });
    forTasks(g.b * g.hq * in.nQb,
             [&](int64_t task) { queryBlockGrad<S>(in, task, pdq); });
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
