//===- AttentionGrad.cpp - Fused scaled-dot-product attention, backward ---===//
//
// FlashAttention-2's backward, the probabilities recomputed from the saved
// log-sum-exp (m, log l): P = exp((score - m) - log l), dP = dout v^T,
// dS = P (dP - Dsum) with Dsum_i = dout_i . out_i. Two parallel passes, so
// that every gradient element is summed by one task in a fixed order and the
// result does not depend on the thread count (no atomics, no per-thread
// partial sums):
//
//   1. one task per (batch, key/value head, key block): dv += P^T dout and
//      dk += dS^T q over every query block of every query head of the group;
//   2. one task per (batch, query head, query block): dq += dS k over the
//      key blocks.
//
// Both passes recompute P and dS with the same code on the same packed
// operands as the forward (the same bits). When there are enough (batch,
// key/value head) pairs to keep the threads busy, one task per pair does
// both passes' work with P and dS computed once per block pair (FA-2's five
// products instead of seven), summing dq in its own buffer in pass 2's
// order: the same bits as the two passes. attentionMaskGrad, for a
// trainable additive mask, recomputes them once more, one task per mask
// (batch, head[, query block]) summing dS over what that part of the mask
// broadcasts to. A dropout on the probabilities redraws the forward's mask
// (the same global indices): dv sums Z P dout and dS = P (Z dP - Dsum).
// Semantics: KernelApi.inc.
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
  std::vector<float> z; // the dropout's factors of P (sized on first use)
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
/// count on are not written). With dropout, t.z holds the mask's factors Z
/// and dS = P (Z dP - Dsum) (t.p stays the undropped P).
void probsAndDs(const Operands &in, int64_t b, int64_t h, int64_t i0,
                int64_t br, int64_t kb, GradTile &t) {
  const common::AttentionDims &g = *in.g;
  int64_t kvh = h / g.group, bc = std::min(kBc, g.sk - kb * kBc);
  in.scores(b, h, i0, br, kb, t.p.data(), t.zeros.data());
  int64_t q0 = in.qRow(b, h, i0);
  for (int64_t r = 0; r < br; ++r) {
    float *row = t.p.data() + r * kBc;
    float m = in.lse[2 * (q0 + r)], logL = in.lse[2 * (q0 + r) + 1];
    if (m == kNegInf) { // no allowed key: P is 0
      std::fill_n(row, bc, 0.0f);
      continue;
    }
    // exp((score - m) - log l): score - m exact near the maximum, as the
    // unfused softmax's exp(score - m).
    for (int64_t c = 0; c < bc; ++c)
      row[c] -= m;
    vecExpSum(row, row, bc, logL);
  }
  const float *vp = in.vp.data() + in.kBlock(b, kvh, kb) * blockFloats(g.dv);
  gemmRows(br, kBc, g.dv, in.dout.p + q0 * in.dout.ld, in.dout.ld,
           t.zeros.data(), vp, kNR, g.dv * kNR, t.ds.data(), kBc, false);
  if (in.dropout && t.z.empty()) // no tile of it without dropout
    t.z.resize(t.p.size());
  for (int64_t r = 0; r < br; ++r) {
    float dsum = in.dsum[q0 + r];
    float *p = t.p.data() + r * kBc, *ds = t.ds.data() + r * kBc;
    if (in.dropout) {
      float *z = t.z.data() + r * kBc;
      in.dropFactors(q0 + r, kb * kBc, bc, z);
      for (int64_t c = 0; c < bc; ++c)
        ds[c] = p[c] * (z[c] * ds[c] - dsum);
      continue;
    }
    for (int64_t c = 0; c < bc; ++c)
      ds[c] = p[c] * (ds[c] - dsum);
  }
}

/// dst[c][r] = src[r][c] (times z[r][c] when z is given) for r < br, c < bc
/// (src and z stride kBc, dst kBr).
void transposeTile(const float *src, int64_t br, int64_t bc, float *dst,
                   const float *z = nullptr) {
  for (int64_t r = 0; r < br; ++r)
    for (int64_t c = 0; c < bc; ++c)
      dst[c * kBr + r] =
          z ? src[r * kBc + c] * z[r * kBc + c] : src[r * kBc + c];
}

/// dk and dv of key block kb of (b, kvh), unscaled, into t.acc and t.acc2
/// (zeroed first), over every query block of every query head of the
/// group. With dqAcc (the group's dq, [group][nQb][kBr][dPad]), also adds
/// dS k into it: the one-pass backward.
void keyBlockPass(const Operands &in, int64_t b, int64_t kvh, int64_t kb,
                  GradTile &t, float *dqAcc) {
  const common::AttentionDims &g = *in.g;
  int64_t j0 = kb * kBc, bc = std::min(kBc, g.sk - j0);
  int64_t dPad = roundUp(g.d, kNR), dvPad = roundUp(g.dv, kNR);
  std::fill(t.acc.begin(), t.acc.end(), 0.0f);
  std::fill(t.acc2.begin(), t.acc2.end(), 0.0f);
  for (int64_t h = kvh * g.group; h < (kvh + 1) * g.group; ++h)
    for (int64_t qb = in.sc.causal ? j0 / kBr : 0; qb < in.nQb; ++qb) {
      int64_t i0 = qb * kBr, br = std::min(kBr, g.s - i0);
      if (!in.sc.anyAllowed(b, h, i0, br, j0, bc))
        continue;
      probsAndDs(in, b, h, i0, br, kb, t);
      // dv sums the dropped probabilities Z P.
      transposeTile(t.p.data(), br, bc, t.pt.data(),
                    in.dropout ? t.z.data() : nullptr);
      transposeTile(t.ds.data(), br, bc, t.dst.data());
      int64_t q0 = in.qRow(b, h, i0);
      gemmRows(bc, dvPad, br, t.pt.data(), kBr, t.zeros.data(),
               in.dout.p + q0 * in.dout.ld, in.dout.ld, kNR, t.acc2.data(),
               dvPad, true);
      gemmRows(bc, dPad, br, t.dst.data(), kBr, t.zeros.data(),
               in.q.p + q0 * in.q.ld, in.q.ld, kNR, t.acc.data(), dPad, true);
      if (dqAcc) // the same product, in the same order, as queryBlockGrad
        gemmRows(br, dPad, bc, t.ds.data(), kBc, t.zeros.data(),
                 in.k.p + in.kRow(b, kvh, j0) * in.k.ld, in.k.ld, kNR,
                 dqAcc + ((h - kvh * g.group) * in.nQb + qb) * kBr * dPad,
                 dPad, true);
    }
}

/// Stores key block kb's dk (scaled) and dv from t.acc and t.acc2.
template <class S>
void storeKeyBlock(const Operands &in, int64_t b, int64_t kvh, int64_t kb,
                   const GradTile &t, S *dk, S *dv) {
  const common::AttentionDims &g = *in.g;
  int64_t j0 = kb * kBc, bc = std::min(kBc, g.sk - j0);
  int64_t dPad = roundUp(g.d, kNR), dvPad = roundUp(g.dv, kNR);
  float scale = in.sc.scale;
  for (int64_t c = 0; c < bc; ++c) {
    int64_t row = in.kRow(b, kvh, j0 + c);
    for (int64_t p = 0; p < g.d; ++p)
      dk[row * g.d + p] = Float<S>::store(scale * t.acc[c * dPad + p]);
    for (int64_t p = 0; p < g.dv; ++p)
      dv[row * g.dv + p] = Float<S>::store(t.acc2[c * dvPad + p]);
  }
}

/// Stores dq rows [i0, i0 + br) of head (b, h), scaled, from acc
/// ([kBr][dPad]).
template <class S>
void storeQueryBlock(const Operands &in, int64_t b, int64_t h, int64_t i0,
                     const float *acc, S *dq) {
  const common::AttentionDims &g = *in.g;
  int64_t br = std::min(kBr, g.s - i0), dPad = roundUp(g.d, kNR);
  for (int64_t r = 0; r < br; ++r) {
    S *o = dq + in.qRow(b, h, i0 + r) * g.d;
    for (int64_t p = 0; p < g.d; ++p)
      o[p] = Float<S>::store(in.sc.scale * acc[r * dPad + p]);
  }
}

/// Two-pass backward, pass 1, task (b, kvh, kb): dk and dv of the key block.
template <class S>
void keyBlockGrads(const Operands &in, int64_t task, S *dk, S *dv) {
  const common::AttentionDims &g = *in.g;
  int64_t bkv = task / in.nKb, b = bkv / g.hkv, kvh = bkv % g.hkv;
  int64_t kb = task % in.nKb;
  GradTile t(g, kBcRows * roundUp(g.d, kNR), kBcRows * roundUp(g.dv, kNR));
  keyBlockPass(in, b, kvh, kb, t, nullptr);
  storeKeyBlock(in, b, kvh, kb, t, dk, dv);
}

/// One-pass backward, task (b, kvh): dk, dv and the group's dq, P and dS
/// computed once per block pair (5 products instead of 7). Each dq element
/// sums over the key blocks in the order queryBlockGrad does: the same bits.
template <class S>
void groupGrads(const Operands &in, int64_t task, S *dq, S *dk, S *dv) {
  const common::AttentionDims &g = *in.g;
  int64_t b = task / g.hkv, kvh = task % g.hkv, dPad = roundUp(g.d, kNR);
  GradTile t(g, kBcRows * dPad, kBcRows * roundUp(g.dv, kNR));
  std::vector<float> dqAcc(
      static_cast<size_t>(g.group * in.nQb * kBr * dPad), 0.0f);
  for (int64_t kb = 0; kb < in.nKb; ++kb) {
    keyBlockPass(in, b, kvh, kb, t, dqAcc.data());
    storeKeyBlock(in, b, kvh, kb, t, dk, dv);
  }
  for (int64_t hi = 0; hi < g.group; ++hi)
    for (int64_t qb = 0; qb < in.nQb; ++qb)
      storeQueryBlock(in, b, kvh * g.group + hi, qb * kBr,
                      dqAcc.data() + (hi * in.nQb + qb) * kBr * dPad, dq);
}

/// Two-pass backward, pass 2, task (b, h, qb): dq of the query block.
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
  storeQueryBlock(in, b, h, i0, t.acc.data(), dq);
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

/// What both backward kernels read: the scores' operands, v's panels,
/// dout's rows, the log-sum-exp and Dsum (withKeyRows: k's rows, for dq).
template <class S>
Operands gradOperands(const common::AttentionDims &g, const TensorRef &q,
                      const TensorRef &k, const TensorRef &v,
                      const TensorRef &out, const TensorRef &lse,
                      const TensorRef &dout, const TensorRef *mask, float scale,
                      bool causal, const common::DropoutPlan *drop,
                      bool withKeyRows) {
  Operands in = scoreOperands<S>(g, q, k, mask, scale, causal, drop);
  if (withKeyRows)
    widenRows<S>(k, g.d, in.k);
  packPanels<S>(v, g.b * g.hkv, g.sk, g.dv, in.vp);
  widenRows<S>(dout, g.dv, in.dout);
  in.lse = lse.as<float>();
  in.dsum = rowDots<S>(out, dout, g.b * g.hq * g.s, g.dv);
  return in;
}

/// The tasks of the mask's gradient: one per mask (batch, head) and, when
/// the mask has a query dim, query block; a task sums dS over the batches,
/// heads and query blocks its mask elements broadcast to, in that order.
struct MaskTasks {
  int64_t mb, mh, mq; // mask batches, heads and query blocks (1: broadcast)
  MaskTasks(const TensorRef &mask, int64_t nQb)
      : mb(mask.shape[0]), mh(mask.shape[1]), mq(mask.shape[2] == 1 ? 1 : nQb) {}
  int64_t count() const { return mb * mh * mq; }
};

/// Task `task` of `m`: adds dS into dmask (f32, the mask's element
/// strides).
void maskTaskGrad(const Operands &in, const MaskTasks &m, int64_t task,
                  float *dmask) {
  const common::AttentionDims &g = *in.g;
  int64_t tb = task / (m.mh * m.mq), th = task / m.mq % m.mh, tq = task % m.mq;
  auto range = [](int64_t n, int64_t full, int64_t at) {
    return n == 1 ? std::pair<int64_t, int64_t>{0, full}
                  : std::pair<int64_t, int64_t>{at, at + 1};
  };
  auto [b0, b1] = range(m.mb, g.b, tb);
  auto [h0, h1] = range(m.mh, g.hq, th);
  auto [q0, q1] = range(m.mq, in.nQb, tq);
  const int64_t *st = g.maskStride;
  GradTile t(g, 0, 0);
  // A query block's P and dS over every key, and per row the sums of P
  // and dS: dS = P (dP - Dsum) with Dsum from the output sums to
  // sum P dP - Dsum sum P, not 0, by the output's rounding; the mask's
  // gradient (sums of dS, which cancel) is recentred with the sums, as the
  // unfused softmax gradient computes it.
  size_t rowFloats = static_cast<size_t>(kBr * g.sk);
  std::vector<float> rowP(rowFloats), rowDs(rowFloats);
  std::vector<double> sumP(kBr), sumDs(kBr);
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t qb = q0; qb < q1; ++qb) {
        int64_t i0 = qb * kBr, br = std::min(kBr, g.s - i0);
        std::fill(rowP.begin(), rowP.end(), 0.0f);
        std::fill(rowDs.begin(), rowDs.end(), 0.0f);
        std::fill(sumP.begin(), sumP.end(), 0.0);
        std::fill(sumDs.begin(), sumDs.end(), 0.0);
        for (int64_t kb = 0; kb <= in.sc.lastKeyBlock(i0, br, in.nKb); ++kb) {
          int64_t j0 = kb * kBc, bc = std::min(kBc, g.sk - j0);
          if (!in.sc.anyAllowed(b, h, i0, br, j0, bc))
            continue;
          probsAndDs(in, b, h, i0, br, kb, t);
          for (int64_t r = 0; r < br; ++r)
            for (int64_t c = 0; c < bc; ++c) {
              float p = t.p[r * kBc + c], ds = t.ds[r * kBc + c];
              rowP[r * g.sk + j0 + c] = p;
              rowDs[r * g.sk + j0 + c] = ds;
              sumP[r] += p;
              sumDs[r] += ds;
            }
        }
        for (int64_t r = 0; r < br; ++r) {
          float shift = sumP[r] > 0 ? static_cast<float>(sumDs[r] / sumP[r]) : 0;
          float *o = dmask + b * st[0] + h * st[1] + (i0 + r) * st[2];
          for (int64_t j = 0; j < g.sk; ++j)
            o[j * st[3]] += rowDs[r * g.sk + j] - rowP[r * g.sk + j] * shift;
        }
      }
}

} // namespace

Status attentionGrad(const TensorRef &q, const TensorRef &k, const TensorRef &v,
                     const TensorRef &out, const TensorRef &lse,
                     const TensorRef &dout, const TensorRef *mask, float scale,
                     bool causal, const TensorRef &dq, const TensorRef &dk,
                     const TensorRef &dv, bool bshd,
                     const DropoutKey *dropout) {
  common::AttentionDims g;
  g.bshd = bshd;
  SMP_RETURN_IF_ERROR(
      common::checkAttentionGrad(q, k, v, out, lse, dout, mask, dq, dk, dv, g));
  common::DropoutPlan drop;
  bool drops = common::attentionDrops(dropout);
  if (drops)
    SMP_RETURN_IF_ERROR(
        common::planAttentionDropout("attention_grad", *dropout, g, drop));
  if (bshd) {
    HeadsFirst hf;
    TensorRef gq = hf.scratchFor(dq), gk = hf.scratchFor(dk),
              gv = hf.scratchFor(dv);
    SMP_RETURN_IF_ERROR(attentionGrad(
        hf.copy(q), hf.copy(k), hf.copy(v), hf.copy(out), lse, hf.copy(dout),
        mask, scale, causal, gq, gk, gv, false, dropout));
    HeadsFirst::writeBack(gq, dq);
    HeadsFirst::writeBack(gk, dk);
    HeadsFirst::writeBack(gv, dv);
    return Status::success();
  }
  return visitFloat(q.dtype, "attention_grad", [&](auto tag) {
    using S = typename decltype(tag)::type;
    Operands in = gradOperands<S>(g, q, k, v, out, lse, dout, mask, scale,
                                  causal, drops ? &drop : nullptr, true);
    S *pdk = dk.as<S>(), *pdv = dv.as<S>(), *pdq = dq.as<S>();
    // One pass when the (batch, key/value head) tasks keep every thread
    // busy (they are equal); else two, with more, smaller tasks. Both give
    // the same bits, so the choice may depend on the thread count.
    int64_t groups = g.b * g.hkv;
    if (groups % maxThreads() == 0 || groups >= 4 * maxThreads()) {
      forTasks(groups, [&](int64_t task) {
        groupGrads<S>(in, task, pdq, pdk, pdv);
      });
      return Status::success();
    }
    forTasks(groups * in.nKb,
             [&](int64_t task) { keyBlockGrads<S>(in, task, pdk, pdv); });
    forTasks(g.b * g.hq * in.nQb,
             [&](int64_t task) { queryBlockGrad<S>(in, task, pdq); });
    return Status::success();
  });
}

Status packedAttentionGrad(const TensorRef &qkv, int64_t kvHeads,
                           const TensorRef &out, const TensorRef &lse,
                           const TensorRef &dout, const TensorRef *mask,
                           float scale, bool causal, const TensorRef &dqkv,
                           const DropoutKey *dropout) {
  common::AttentionDims g;
  SMP_RETURN_IF_ERROR(common::checkPackedAttentionGrad(qkv, kvHeads, out, lse,
                                                       dout, mask, dqkv, g));
  common::PackedViews in = common::packedViews(qkv, g),
                      d = common::packedViews(dqkv, g);
  HeadsFirst hf;
  TensorRef gq = hf.scratchFor(d.q), gk = hf.scratchFor(d.k),
            gv = hf.scratchFor(d.v);
  SMP_RETURN_IF_ERROR(
      attentionGrad(hf.copy(in.q, g.qkvLd), hf.copy(in.k, g.qkvLd),
                    hf.copy(in.v, g.qkvLd), hf.copy(out), lse, hf.copy(dout),
                    mask, scale, causal, gq, gk, gv, false, dropout));
  HeadsFirst::writeBack(gq, d.q, g.qkvLd);
  HeadsFirst::writeBack(gk, d.k, g.qkvLd);
  HeadsFirst::writeBack(gv, d.v, g.qkvLd);
  return Status::success();
}

Status attentionMaskGrad(const TensorRef &q, const TensorRef &k,
                         const TensorRef &v, const TensorRef &out,
                         const TensorRef &lse, const TensorRef &dout,
                         const TensorRef &mask, float scale, bool causal,
                         const TensorRef &dmask, bool bshd,
                         const DropoutKey *dropout) {
  common::AttentionDims g;
  g.bshd = bshd;
  SMP_RETURN_IF_ERROR(common::checkAttentionMaskGrad(q, k, v, out, lse, dout,
                                                     mask, dmask, g));
  common::DropoutPlan drop;
  bool drops = common::attentionDrops(dropout);
  if (drops)
    SMP_RETURN_IF_ERROR(
        common::planAttentionDropout("attention_mask_grad", *dropout, g, drop));
  if (bshd) {
    HeadsFirst hf;
    return attentionMaskGrad(hf.copy(q), hf.copy(k), hf.copy(v), hf.copy(out),
                             lse, hf.copy(dout), mask, scale, causal, dmask,
                             false, dropout);
  }
  return visitFloat(q.dtype, "attention_mask_grad", [&](auto tag) {
    using S = typename decltype(tag)::type;
    Operands in = gradOperands<S>(g, q, k, v, out, lse, dout, &mask, scale,
                                  causal, drops ? &drop : nullptr, false);
    // f32 sums in the result itself; f16 / bf16 in an f32 copy, rounded once.
    std::vector<float> wide;
    float *acc = dmask.as<float>();
    if (!std::is_same_v<S, float>) {
      wide.assign(static_cast<size_t>(dmask.numel()), 0.0f);
      acc = wide.data();
    } else {
      std::fill_n(acc, dmask.numel(), 0.0f);
    }
    MaskTasks tasks(mask, in.nQb);
    forTasks(tasks.count(),
             [&](int64_t task) { maskTaskGrad(in, tasks, task, acc); });
    if (!std::is_same_v<S, float>) {
      S *o = dmask.as<S>();
      for (int64_t i = 0; i < dmask.numel(); ++i)
        o[i] = Float<S>::store(wide[static_cast<size_t>(i)]);
    }
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
