//===- AttentionFragments.cuh - Score fragments of the tensor-core attention
//===//
//
// What the tensor-core attention kernels (AttentionMma.cu on mma.sync,
// AttentionWgmma.cu on Hopper's wgmma) do to a warp's 16 x 64 score
// fragments, in mma.sync's C layout (which wgmma's m64nNk16 accumulators
// share, warp by warp): which tiles need masking, the scale and mask
// (scaleAndMask), the dropout's factors, the base-2 online softmax and the
// backward's row offsets. Private to kernels/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_ATTENTIONFRAGMENTS_CUH
#define SMP_KERNELS_CUDA_ATTENTIONFRAGMENTS_CUH

#include "Attention.cuh"
#include "AttentionTiles.cuh"

namespace smp::kernels::cuda::detail {

/// Whether queries [i0, i0 + rows) against keys [j0, j0 + keys) need
/// elements masked: a mask, the causal diagonal, or a sequence's end.
__device__ inline bool tileNeedsMask(const AttnArgs &a, int64_t i0, int64_t j0,
                                     int rows = kAttnTile,
                                     int keys = kAttnTile) {
  return a.mask || (a.causal && j0 + keys - 1 > i0) || i0 + rows > a.g.s ||
         j0 + keys > a.g.sk;
}

/// Whether the causal mask hides every element of queries [i0, i0 + rows)
/// against keys from j0: each key comes after each query.
__device__ inline bool causalHidesAll(const AttnArgs &a, int64_t i0, int64_t j0,
                                      int rows) {
  return a.causal && j0 > i0 + rows - 1;
}

/// The row and column of C-fragment element (nt, e) in the warp's 16 x 64
/// tile.
__device__ inline void fragmentRowCol(int nt, int e, int &row, int &col) {
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  row = g + (e >= 2 ? 8 : 0);
  col = nt * 8 + 2 * t + e % 2;
}

/// The query and key of fragment element (nt, e) of a warp tile whose rows
/// start at r0 and columns at c0 (kKeyRows: the rows are keys).
template <bool kKeyRows>
__device__ inline void fragmentQueryKey(int nt, int e, int64_t r0, int64_t c0,
                                        int64_t &i, int64_t &j) {
  int row, col;
  fragmentRowCol(nt, e, row, col);
  i = kKeyRows ? c0 + col : r0 + row;
  j = kKeyRows ? r0 + row : c0 + col;
}

/// log2(e): the kernels' softmax works in base 2 (one multiply-add and one
/// ex2 a probability, as FlashAttention's), the statistics they keep (lse:
/// the row maximum m and log l) in base e.
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

/// 2^x, the hardware's approximation (ex2.approx.ftz: 2 ulp; 0 for -inf).
__device__ inline float exp2Fast(float x) {
#ifdef SMP_CUDAEMU
  return exp2f(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

/// n clamped to [-2^30, 2^30]: a fragment's 32-bit offsets (under 64) can be
/// compared with it.
__device__ inline int clampOffset(int64_t n) {
  return static_cast<int>(max(int64_t(-(1 << 30)), min(n, int64_t(1 << 30))));
}

/// The warp's scores with -inf where key j may not be seen by query i, and
/// the factor k that makes them base-2 scores (s k: the score times scale
/// and log2(e)), which the softmax applies in the multiply-add that
/// subtracts the row's maximum. Fragment rows start at query r0 and columns
/// at key c0; kKeyRows: the rows are keys and the columns queries (the key
/// pass's S^T). Three loops, the branch between them the whole tile's: a
/// tile without masked elements is left as it is; one on the causal
/// diagonal or a sequence's end without a mask tensor compares the
/// element's 32-bit offsets from (r0, c0) with the tile's limits; one with
/// a mask tensor reads it and returns scores already scaled (k = 1). The
/// scale is positive (attentionOnTensorCores), so the maximum of s k is k
/// times the maximum of s. (One loop with a test of the tile's flag inside
/// had kept a branch an element in every tile.)
template <class S, bool kKeyRows, int kN = kNt>
__device__ float scaleAndMask(float (&s)[kN][4], const AttnArgs &a, int64_t b,
                              int64_t h, int64_t r0, int64_t c0, bool mask) {
  float scale = a.scale * kLog2e;
  if (!mask)
    return scale;
  if (!a.mask) {
    int64_t i0 = kKeyRows ? c0 : r0, j0 = kKeyRows ? r0 : c0;
    // Query offset di and key offset dj are seen when di < iLeft, dj <
    // jLeft and (causal) i0 + di >= j0 + dj, i.e. dj - di <= diag.
    int iLeft = clampOffset(a.g.s - i0), jLeft = clampOffset(a.g.sk - j0);
    int diag = a.causal ? clampOffset(i0 - j0) : (1 << 30);
#pragma unroll
    for (int nt = 0; nt < kN; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int row, col;
        fragmentRowCol(nt, e, row, col);
        int di = kKeyRows ? col : row, dj = kKeyRows ? row : col;
        bool off = di >= iLeft || dj >= jLeft || dj - di > diag;
        if (off)
          s[nt][e] = -INFINITY;
      }
    return scale;
  }
#pragma unroll
  for (int nt = 0; nt < kN; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int64_t i, j;
      fragmentQueryKey<kKeyRows>(nt, e, r0, c0, i, j);
      float add;
      if (i >= a.g.s || j >= a.g.sk || !maskAt<S>(a, b, h, i, j, add))
        s[nt][e] = -INFINITY;
      else
        s[nt][e] = (a.scale * s[nt][e] + add) * kLog2e;
    }
  return 1.0f;
}

/// The dropout's factor of fragment element (nt, e) (dropFactor of its
/// query and key; r0, c0, kKeyRows as scaleAndMask's), 1 without one
/// (kDrop: the kernel's instance with the dropout; the one without keeps
/// its loop free of the dropout's code).
template <bool kKeyRows, bool kDrop>
__device__ inline float fragmentDropFactor(const AttnArgs &a, int64_t b,
                                           int64_t h, int64_t r0, int64_t c0,
                                           int nt, int e) {
  if constexpr (!kDrop)
    return 1.0f;
  int64_t i, j;
  fragmentQueryKey<kKeyRows>(nt, e, r0, c0, i, j);
  return dropFactor(a, b, h, i, j);
}

/// The forward's end for one warp's 16-row tile (rows from query i): o
/// divided by the rows' sums l, rounded into the shared tile at row r0
/// (storeRows writes it out after a barrier), and each row's statistics
/// (m, log l), base e, into lse's pair at stat0 + its query (rows past
/// `rows` not written; a row without keys gets -inf twice).
template <class S, int D>
__device__ void finishForwardRows(float (&o)[D / 8][4], const float (&m)[2],
                                  const float (&l)[2], S *tile, int r0,
                                  int64_t i, int64_t rows, float *lse,
                                  int64_t stat0) {
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float lr = l[e / 2];
      o[nt][e] = lr == 0.0f ? 0.0f : o[nt][e] / lr;
    }
  fragmentsToTile<S, D>(o, 1.0f, tile, r0);
  if (threadIdx.x % 4 != 0)
    return;
  int gr = threadIdx.x % 32 / 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int64_t q = i + gr + 8 * half;
    if (q < rows) {
      bool none = l[half] == 0.0f;
      lse[2 * (stat0 + q)] = none ? -INFINITY : m[half] * kLn2;
      lse[2 * (stat0 + q) + 1] = none ? -INFINITY : logf(l[half]);
    }
  }
}

/// What the backward subtracts from a query's base-2 scores for its
/// probabilities: (m + log l) log2(e) from the forward's statistics, +inf
/// for a row without keys (every probability 0, as for a masked score).
__device__ inline float rowOffset(float m, float logL) {
  return m == -INFINITY ? INFINITY : (m + logL) * kLog2e;
}

/// The online softmax of the warp's score tile (scaleAndMask's scores s and
/// factor k > 0): s becomes P = 2^(s k - m) with the rows' new maxima m of
/// s k (base 2); l and the output rows o are rescaled. A row whose scores
/// are all -inf so far subtracts 0 (its P and correction 2^-inf = 0), so no
/// element needs a test of its own.
template <int D>
__device__ void onlineSoftmax(float (&s)[kNt][4], float k, float (&m)[2],
                              float (&l)[2], float (&o)[D / 8][4]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float mx = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt)
      mx = fmaxf(mx, fmaxf(s[nt][2 * half], s[nt][2 * half + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    float mNew = fmaxf(m[half], mx * k);
    float mUse = mNew == -INFINITY ? 0.0f : mNew;
    float corr = exp2Fast(m[half] - mUse);
    float sums[2] = {0.0f, 0.0f}; // two chains of additions, not one
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float p = exp2Fast(fmaf(s[nt][2 * half + e], k, -mUse));
        s[nt][2 * half + e] = p;
        sums[e] += p;
      }
    float sum = sums[0] + sums[1];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    l[half] = l[half] * corr + sum;
    m[half] = mNew;
#pragma unroll
    for (int nt = 0; nt < D / 8; ++nt) {
      o[nt][2 * half] *= corr;
      o[nt][2 * half + 1] *= corr;
    }
  }
}

} // namespace smp::kernels::cuda::detail

#endif // SMP_KERNELS_CUDA_ATTENTIONFRAGMENTS_CUH
