//===- AttentionBlocks.h - Building blocks of the CPU attention ---*- C++
//-*-===//
//
// What the fused attention forward (Attention.cpp) and backward
// (AttentionGrad.cpp) share: the block sizes, the operands widened to f32
// and packed once per call, the register-blocked product of a block of
// rows with a packed block, the scores of one row (scale, mask, causal) and
// the test that skips a block no query of which may attend any key of.
//
// Every product here computes each element of C as one FMA chain over k
// in order (the AVX2 tile and the scalar fallback alike), so a score is the
// same bits wherever it is recomputed (forward, both backward passes) and
// whatever the thread count.
//
// Private to kernels/cpu.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CPU_ATTENTIONBLOCKS_H
#define SMP_KERNELS_CPU_ATTENTIONBLOCKS_H

#include "Common.h"
#include "DropoutRun.h"

namespace smp::kernels::cpu::detail::attn {

/// Register tile: kMR rows x kNR columns of C.
constexpr int64_t kMR = 6, kNR = 16;
/// Query rows and keys per block. A block's operands (96 rows of q, 64
/// keys of k and v at head dim 64: 24 + 16 + 16 KiB) and its score tile stay
/// in a core's L2, the packed key block (16 KiB) in L1.
constexpr int64_t kBr = 96, kBc = 64;
static_assert(kBr % kMR == 0 && kBc % kNR == 0, "whole register tiles");

constexpr int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
constexpr int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// C[r][0, n) (+)= sum over p < k of A[r][p] B[p][0, n) for r < roundUp(m,
/// kMR): A row r at a + r * lda (rows from m on read `zeros`, at least k
/// long), B's 16-column panel q at b + q * panelStride with row stride ldb,
/// C row r at c + r * ldc. n is a multiple of kNR. With acc, adds to C.
void gemmRows(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
              const float *zeros, const float *b, int64_t ldb,
              int64_t panelStride, float *c, int64_t ldc, bool acc);

/// An operand as f32 rows [rows][ld] (ld = cols rounded up to kNR, zero
/// padded), the tensor's own memory when it already is that.
struct Rows {
  const float *p = nullptr;
  int64_t ld = 0;
  std::vector<float> own;
};

template <class S> void widenRows(const TensorRef &t, int64_t cols, Rows &r) {
  int64_t rows = cols ? t.numel() / cols : 0;
  r.ld = roundUp(cols, kNR);
  if (std::is_same_v<S, float> && r.ld == cols) {
    r.p = static_cast<const float *>(t.data);
    return;
  }
  r.own.assign(static_cast<size_t>(rows * r.ld), 0.0f);
  const S *in = t.as<S>();
  float *o = r.own.data();
  parallelFor(rows, grainFor(cols), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      for (int64_t j = 0; j < cols; ++j)
        o[i * r.ld + j] = Float<S>::load(in[i * cols + j]);
  });
  r.p = o;
}

/// t viewed as [heads][keys][dim], transposed into B panels: for each head
/// and block of kBc keys, kBc / kNR panels of [dim][kNR] (keys past the
/// end are zeros). Block (h, kb) starts at blockFloats(dim) * (h * nKb + kb).
inline int64_t blockFloats(int64_t dim) { return kBc * dim; }
template <class S>
void packPanels(const TensorRef &t, int64_t heads, int64_t keys, int64_t dim,
                std::vector<float> &out) {
  int64_t nKb = ceilDiv(keys, kBc);
  out.assign(static_cast<size_t>(heads * nKb * blockFloats(dim)), 0.0f);
  const S *in = t.as<S>();
  parallelFor(heads * nKb, grainFor(kBc * dim), [&](int64_t b, int64_t e) {
    for (int64_t hb = b; hb < e; ++hb) {
      int64_t h = hb / nKb, j0 = hb % nKb * kBc;
      int64_t bc = std::min(kBc, keys - j0);
      float *blk = out.data() + hb * blockFloats(dim);
      for (int64_t c = 0; c < bc; ++c) {
        const S *row = in + (h * keys + j0 + c) * dim;
        float *dst = blk + c / kNR * dim * kNR + c % kNR;
        for (int64_t p = 0; p < dim; ++p)
          dst[p * kNR] = Float<S>::load(row[p]);
      }
    }
  });
}

/// The scores' mask and causal flag.
struct Scores {
  float scale = 1;
  bool causal = false;
  const void *mask = nullptr; // null: none
  DType maskType = DType::Bool;
  int64_t st[4] = {0, 0, 0, 0}; // mask element strides of b, h, i, j

  /// row[c] for c < bc (q_i . k_j for j = j0 + c on entry) becomes the
  /// score scale * row[c] (+ the float mask), or -inf where key j is not
  /// allowed.
  void row(float *row, int64_t b, int64_t h, int64_t i, int64_t j0,
           int64_t bc) const;
  /// Whether any query of [i0, i0 + br) may attend any key of [j0, j0 +
  /// bc) (false: the block is skipped).
  bool anyAllowed(int64_t b, int64_t h, int64_t i0, int64_t br, int64_t j0,
                  int64_t bc) const;
  /// The last key block that query block [i0, i0 + br) may attend (causal).
  int64_t lastKeyBlock(int64_t i0, int64_t br, int64_t nKb) const {
    return causal ? std::min(nKb - 1, (i0 + br - 1) / kBc) : nKb - 1;
  }
};

/// The Scores of a checked call.
Scores makeScores(const common::AttentionDims &g, const TensorRef *mask,
                  float scale, bool causal);

/// A call's operands as f32, prepared once (the forward fills q, kp and v;
/// the backward all but v).
struct Operands {
  const common::AttentionDims *g = nullptr;
  Scores sc;
  int64_t nQb = 0, nKb = 0; // query and key blocks per head
  Rows q;                   // [b * hq * s] rows of d
  std::vector<float> kp;    // k's panels (packPanels, dim d)
  Rows v;                   // [b * hkv * sk] rows of dv (forward)
  Rows k;                   // [b * hkv * sk] rows of d (backward)
  std::vector<float> vp;    // v's panels (packPanels, dim dv; backward)
  Rows dout;                // [b * hq * s] rows of dv (backward)
  const float *lse = nullptr;
  std::vector<float> dsum; // dout_i . out_i per query (backward)
  /// The dropout on the probabilities (planAttentionDropout), if any.
  bool dropout = false;
  common::DropoutPlan drop;

  /// The first q / dout row of query i0 of head (b, h), the first k / v row
  /// and the key panels of key block kb of head (b, kvh).
  int64_t qRow(int64_t b, int64_t h, int64_t i0) const {
    return (b * g->hq + h) * g->s + i0;
  }
  int64_t kRow(int64_t b, int64_t kvh, int64_t j0) const {
    return (b * g->hkv + kvh) * g->sk + j0;
  }
  int64_t kBlock(int64_t b, int64_t kvh, int64_t kb) const {
    return (b * g->hkv + kvh) * nKb + kb;
  }

  /// z[c] = the dropout's factor of P's element (q row `row`, key j0 + c)
  /// for c < bc: 1 / (1 - ratio) where the mask keeps it, else 0 (call
  /// only with dropout).
  void dropFactors(int64_t row, int64_t j0, int64_t bc, float *z) const;

  /// s[r][c] (row stride kBc) = the scores of query i0 + r of head (b, h)
  /// against key kb * kBc + c, for r < br and c < that block's keys.
  void scores(int64_t b, int64_t h, int64_t i0, int64_t br, int64_t kb,
              float *s, const float *zeros) const;
};

/// What the forward and the backward both read: the geometry, the scores'
/// mask, the dropout on the probabilities (null: none), the block counts,
/// q's rows and k's panels.
template <class S>
Operands scoreOperands(const common::AttentionDims &g, const TensorRef &q,
                       const TensorRef &k, const TensorRef *mask, float scale,
                       bool causal, const common::DropoutPlan *drop) {
  Operands in;
  in.g = &g;
  if (drop) {
    in.dropout = true;
    in.drop = *drop;
  }
  in.sc = makeScores(g, mask, scale, causal);
  in.nQb = ceilDiv(g.s, kBr);
  in.nKb = ceilDiv(g.sk, kBc);
  widenRows<S>(q, g.d, in.q);
  packPanels<S>(k, g.b * g.hkv, g.sk, g.d, in.kp);
  return in;
}

/// The [B, S, H, D] (bshd) operands of a call as [B, H, S, D] copies, and
/// its [B, H, S, D] results written back as [B, S, H, D]: the CPU kernels
/// index heads-first, and their operands are widened into f32 copies
/// anyway, so the layout costs one more copy of each (what the transposes
/// the layout removes from the graph cost).
class HeadsFirst {
public:
  /// t [B, X, Y, D] as a [B, Y, X, D] copy (owned here); ld: the elements
  /// between t's consecutive x (0: Y D, contiguous; a packed q, k or v:
  /// the packed tensor's row).
  TensorRef copy(const TensorRef &t, int64_t ld = 0);
  /// A buffer (owned here) for the heads-first form of the bshd result t.
  TensorRef scratchFor(const TensorRef &t);
  /// Writes the heads-first `from` into the bshd `to` (ld: the elements
  /// between to's positions, 0: contiguous).
  static void writeBack(const TensorRef &from, const TensorRef &to,
                        int64_t ld = 0);

private:
  std::vector<std::vector<unsigned char>> bufs_;
};

/// Runs f(task) for task in [0, n) on the OpenMP threads, dynamically
/// scheduled (each task writes its own outputs: the results do not depend
/// on which thread runs it).
template <class F> void forTasks(int64_t n, F &&f) {
  int threads = static_cast<int>(std::min<int64_t>(maxThreads(), n));
  if (threads <= 1) {
    for (int64_t t = 0; t < n; ++t)
      f(t);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
#endif
  for (int64_t t = 0; t < n; ++t)
    f(t);
}

} // namespace smp::kernels::cpu::detail::attn

#endif // SMP_KERNELS_CPU_ATTENTIONBLOCKS_H
