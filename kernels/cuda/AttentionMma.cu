//===- AttentionMma.cu - Fused attention on the tensor cores --------------===//
//
// FlashAttention-2 for f16/bf16 q, k, v with D = Dv in {32, 64, 96, 128}:
// every product on the tensor cores (mma.sync.m16n8k16, f32 accumulation;
// Mma.cuh), the softmax in f32 registers. Tiles of 64 queries and 64 keys,
// four warps of 16 rows each; operand tiles in shared memory (row stride
// D + 8 elements: ldmatrix's eight rows fall in distinct banks), read into
// fragments with ldmatrix; the tiles a loop walks are double-buffered, the
// next one's cp.async copies in flight while the current one is computed.
//
//   forward:  one block per (query tile, head, batch): S = Q K^T, the
//             online softmax per row (running max m and sum l), O += P V
//             with P rounded to the storage type in the registers.
//   backward: the deterministic two passes of Attention.cu, no atomics,
//             after a kernel that writes each query row's (offset from
//             lse, Dsum = rowsum(dout * out)) as a float2 (stream-ordered
//             scratch):
//             keys:    one block per (key tile, key/value head, batch), the
//                      warp's rows are keys: S^T = K Q^T, P^T, dP^T = V dO^T,
//                      dS^T = P^T (dP^T - Dsum), dV += P^T dO, dK += dS^T Q
//                      over the query tiles of every head of the group;
//             queries: one block per (query tile, head, batch): S, P,
//                      dP = dO V^T, dS, dQ += dS K over the key tiles.
//             At D <= 64 without dropout either pass may take 128 rows a
//             block, 32 a warp (setAttentionGradRows; the same bytes),
//             as the forward may (setAttentionForwardRows).
//
// Like FlashAttention and cuDNN, P and dS are rounded to f16/bf16 for the
// products that read them; scores, softmax statistics and accumulators stay
// f32. Key tiles above the causal diagonal are not visited; elements are
// masked (causal, the mask, past the sequences) only in tiles that need it.
// A dropout on the probabilities scales P by each element's mask factor
// (dropFactor) after the softmax's sums, as Attention.cu's kernels do; each
// kernel has an instance with the dropout and one without (kDrop), so that
// the loops without it hold none of its code (inlined into the unrolled
// loops, the draws had made them 9,000 to 22,000 instructions long, and the
// warps waited for instructions to be fetched).
//
// Speed (docs/benchmarks.md, "Fused attention on the GPU"): every loop
// over a fragment is unrolled (a loop left rolled puts its register arrays
// in local memory: `nvcc -Xptxas -v` shows no stack frame for the
// instances without dropout), and so is every tile copy (forTileVectors:
// a thread's vectors a count known when compiling); the softmax works in
// base 2, one multiply-add (the scale in it) and one ex2.approx a
// probability, the statistics stored in lse in base e (docs/architecture.md
// says what that rounds); a tile that needs masking without a mask tensor
// compares 32-bit offsets only, one that needs none takes no test at all;
// the key pass copies its rows' statistics with cp.async. What a tile's
// loop costs is read without a GPU by scripts/sass-loops.py.
//
//===----------------------------------------------------------------------===//

#include "Attention.cuh"
#include "AttentionFragments.cuh"
#include "AttentionTiles.cuh"

#include <limits>

namespace smp::kernels::cuda {
using namespace detail;

namespace {

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// The blocks of the 64-row forward an SM's shared memory holds (five tiles
/// a block: 4 at D <= 64, 3 at D = 96, 2 at D = 128), which its register
/// bound keeps possible.
template <int D>
constexpr int kForwardBlocksPerSm = D <= 64   ? 4
                                    : D <= 96 ? 3
                                              : 2;

/// kM = 1: 64 queries a block, 16 a warp; kM = 2: 128 and 32 (each K and V
/// fragment read from shared memory serves two row tiles). At kM = 1
/// without dropout, kForwardBlocksPerSm blocks an SM (the dropout's instance
/// would spill).
template <class S, int D, int kM, bool kDrop>
__global__ void
__launch_bounds__(kAttnThreads, kM == 1 && !kDrop ? kForwardBlocksPerSm<D> : 1)
    attnForwardMma(AttnArgs a, const S *q, const S *k, const S *v, S *out,
                   float *lse) {
  extern __shared__ float4 smem[];
  const common::AttentionDims &g = a.g;
  constexpr int kRows = kM * kAttnTile; // queries of the block
  constexpr int64_t kT = kTileElems<D>; // elements of a key tile
  S *sq = reinterpret_cast<S *>(smem), *skv = sq + kM * kT; // k0 v0 k1 v1
  int64_t b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kRows;
  int64_t kvh = h / g.group;
  int64_t stat0 = (b * g.hq + h) * g.s; // lse's first row of the head
  HeadRows qr = queryRows(g, b, h), kr = keyRows(g, b, kvh, g.d);
  int r0 = 16 * kM * (threadIdx.x / 32); // the warp's first row
  loadRowsAsync<S, D, kRows>(q + qr.start, int(qr.ld), i0, g.s, sq);
  float o[kM][D / 8][4] = {}, m[kM][2], l[kM][2] = {};
#pragma unroll
  for (int t = 0; t < kM; ++t)
    m[t][0] = m[t][1] = -INFINITY;
  int64_t jEnd = a.causal ? min(g.sk, i0 + kRows) : g.sk;
  forKeyTiles<S, D>(k + kr.start, v + kr.start, int(kr.ld), g.sk, jEnd, skv,
                    [&](int64_t j0, const S *sk, const S *sv) {
                      float s[kM][kNt][4];
                      productABt<S, D, kM>(s, sq, r0, sk);
                      bool mask = tileNeedsMask(a, i0, j0, kRows);
#pragma unroll
                      for (int t = 0; t < kM; ++t) {
                        float k = scaleAndMask<S, false>(
                            s[t], a, b, h, i0 + r0 + 16 * t, j0, mask);
                        onlineSoftmax<D>(s[t], k, m[t], l[t], o[t]);
                        if constexpr (kDrop) // after l: only P v is dropped
#pragma unroll
                          for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
                            for (int e = 0; e < 4; ++e)
                              s[t][nt][e] *= fragmentDropFactor<false, kDrop>(
                                  a, b, h, i0 + r0 + 16 * t, j0, nt, e);
                      }
                      accumulatePX<S, D, kM>(o, s, sv);
                    });
#pragma unroll
  for (int t = 0; t < kM; ++t)
    finishForwardRows<S, D>(o[t], m[t], l[t], sq, r0 + 16 * t, i0 + r0 + 16 * t,
                            g.s, lse, stat0);
  __syncthreads();
  HeadRows orow = outRows(g, b, h);
  storeRows<S, D, kRows>(sq, out + orow.start, int(orow.ld), i0, g.s);
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// What the backward passes read of each query row (rows in lse's [B, Hq,
/// S, 2] order): stat[row] = (rowOffset of its lse, Dsum = dout[row] .
/// out[row] over D in f32). Eight lanes a row, each reading 16-byte pieces
/// (lane j: pieces j, j + 8, ...; a warp reads four rows whole), their
/// partial sums added by shuffles in a fixed order. (The key pass copies a
/// tile's 64 pairs into shared memory with cp.async; it had loaded lse and
/// Dsum and stored them, its warps waiting for the loads at every tile.)
template <class S, int D>
__global__ void attnDsum(common::AttentionDims g, const S *out, const S *dout,
                         const float *lse, float2 *stat, int64_t rows) {
  int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 8;
  int j = threadIdx.x % 8;
  float acc = 0.0f;
  int64_t at = 0;
  if (r < rows) {
    int64_t i = r % g.s, bh = r / g.s;
    HeadRows orow = outRows(g, bh / g.hq, bh % g.hq);
    at = orow.start + i * orow.ld;
  }
  if (r < rows)
#pragma unroll
    for (int c = j; c < D / 8; c += 8) {
      alignas(16) S x[8], y[8];
      copy16(x, dout + at + c * 8);
      copy16(y, out + at + c * 8);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        acc = fmaf(FT<S>::load(x[e]), FT<S>::load(y[e]), acc);
    }
  for (int o = 4; o > 0; o /= 2)
    acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (r < rows && j == 0)
    stat[r] = make_float2(rowOffset(lse[2 * r], lse[2 * r + 1]), acc);
}

/// dS = P (Z dP - Dsum) in place of dp, s (scaleAndMask's scores and factor
/// k) becoming Z P (Z the dropout's factor, `zOf(nt, e)`, 1 without one):
/// one value per element; `stat(nt, e)` gives the (rowOffset, Dsum) of the
/// element's query.
template <int kN, class F, class Z>
__device__ void probsAndDs(float (&s)[kN][4], float (&dp)[kN][4], float k,
                           F stat, Z zOf) {
#pragma unroll
  for (int nt = 0; nt < kN; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float2 st = stat(nt, e);
      float p = exp2Fast(fmaf(s[nt][e], k, -st.x)), z = zOf(nt, e);
      s[nt][e] = p * z;
      dp[nt][e] = p * (z * dp[nt][e] - st.y);
    }
}

/// The backward's blocks an SM: kM = 1 (64 rows a block, 16 a warp) three
/// at D <= 64 without dropout (170 registers, no spills in the query pass
/// and 12 bytes in the key pass: ptxas took 175 unbounded, two blocks, 8
/// warps an SM; at four, 128 registers, the unrolled loops spill), one
/// otherwise (D = 96 and 128, and the dropout's instances, would spill at
/// that bound); kM = 2 (128 rows, 32 a warp; D <= 64 without dropout only)
/// two, up to 255 registers.
template <int D, int kM, bool kDrop>
constexpr int kGradBlocksPerSm = kM == 2             ? 2
                                 : D <= 64 && !kDrop ? 3
                                                     : 1;

/// The key pass. kM = 1: 64 keys a block, 16 a warp, each query tile's
/// scores computed 64 columns at once. kM = 2: 128 keys, 32 a warp, a
/// query tile's columns in two slices of 32 (the warp's 32 x 32 scores and
/// their gradients, 64 registers, beside its 32 dK and dV rows, 128), so
/// that each Q and dO fragment read from shared memory serves two row
/// tiles: 48 ldmatrix a warp for 128 products of 16 keys where kM = 1
/// takes 72 (docs/benchmarks.md, "Fused attention on the GPU"). The same
/// operations in the same order on every element either way (the query
/// tile's slices in order, each dK and dV row's sums over them in the
/// order of kM = 1's k-steps), so the same bytes; a slice whose queries all
/// come before the warp's keys (causal) is skipped, its probabilities all
/// 0, as kM = 1's blocks never visit it.
template <class S, int D, int kM, bool kDrop>
__global__ void __launch_bounds__(kAttnThreads, kGradBlocksPerSm<D, kM, kDrop>)
    attnGradKeysMma(AttnArgs a, const S *q, const S *k, const S *v,
                    const float2 *stat, const S *dout, S *dk, S *dv) {
  extern __shared__ float4 smem[];
  const common::AttentionDims &g = a.g;
  constexpr int kKeys = kM * kAttnTile;        // keys of the block
  constexpr int kN = kNt / kM, kCols = 8 * kN; // a slice's n-tiles, queries
  constexpr int64_t kT = kTileElems<D>;
  // k, v, then two buffers of (q, dout), then two of 64 (offset, Dsum).
  S *sk = reinterpret_cast<S *>(smem), *sv = sk + kM * kT, *sqdo = sv + kM * kT;
  float2 *sStat = reinterpret_cast<float2 *>(sqdo + 4 * kT);
  int64_t b = blockIdx.z, kvh = blockIdx.y, j0 = int64_t(blockIdx.x) * kKeys;
  HeadRows kr = keyRows(g, b, kvh, g.d);
  int r0 = 16 * kM * (threadIdx.x / 32), t = threadIdx.x % 4;
  loadRowsAsync<S, D, kKeys>(k + kr.start, int(kr.ld), j0, g.sk, sk);
  loadRowsAsync<S, D, kKeys>(v + kr.start, int(kr.ld), j0, g.sk, sv);
  float dkAcc[kM][D / 8][4] = {}, dvAcc[kM][D / 8][4] = {};
  // The query tiles of every head of the group, in order: the tile the
  // next copies are for, and the one the next body computes (the loop
  // visits both in order; a division of the tile's index had cost some 40
  // instructions a tile).
  int64_t iStart = a.causal ? j0 : 0;
  QueryTileWalk next{kvh * g.group, iStart}, cur = next;
  pipelined(
      tilesFrom(iStart, g.s) * static_cast<int>(g.group),
      [&](int, int buf) {
        int64_t h = next.h, i0 = next.i0, stat0 = (b * g.hq + h) * g.s;
        next.advance(iStart, g.s);
        HeadRows qr = queryRows(g, b, h), orow = outRows(g, b, h);
        loadRowsAsync<S, D>(q + qr.start, int(qr.ld), i0, g.s,
                            sqdo + 2 * buf * kT);
        loadRowsAsync<S, D>(dout + orow.start, int(orow.ld), i0, g.s,
                            sqdo + (2 * buf + 1) * kT);
        if (threadIdx.x < kAttnTile) {
          int64_t i = i0 + threadIdx.x;
          float2 *st = sStat + buf * kAttnTile + threadIdx.x;
          if (i < g.s)
            cpAsync<8>(st, stat + stat0 + i);
          else // no query: every probability 0
            *st = make_float2(INFINITY, 0.0f);
        }
      },
      [&](int, int buf) {
        const float2 *st = sStat + buf * kAttnTile;
        int64_t h = cur.h, i0 = cur.i0;
        cur.advance(iStart, g.s);
#pragma unroll
        for (int c = 0; c < kAttnTile; c += kCols) {
          int64_t jw = j0 + r0; // the warp's first key
          if (causalHidesAll(a, i0 + c, jw, kCols))
            continue;
          const S *sq = sqdo + 2 * buf * kT + c * kLd<D>,
                  *sdo = sqdo + (2 * buf + 1) * kT + c * kLd<D>;
          float s[kM][kN][4], dp[kM][kN][4], kf[kM];
          productABt<S, D, kM, kN>(s, sk, r0, sq);
          bool mask = tileNeedsMask(a, i0 + c, jw, kCols, 16 * kM);
#pragma unroll
          for (int m = 0; m < kM; ++m)
            kf[m] = scaleAndMask<S, true, kN>(s[m], a, b, h, jw + 16 * m,
                                              i0 + c, mask);
          productABt<S, D, kM, kN>(dp, sv, r0, sdo);
#pragma unroll
          for (int m = 0; m < kM; ++m)
            probsAndDs(
                s[m], dp[m], kf[m],
                [&](int nt, int e) {
                  return st[c + nt * 8 + 2 * t + e % 2]; // the column's query
                },
                [&](int nt, int e) {
                  return fragmentDropFactor<true, kDrop>(a, b, h, jw + 16 * m,
                                                         i0 + c, nt, e);
                });
          accumulatePX<S, D, kM, kN>(dvAcc, s, sdo); // dV += P^T dO
          accumulatePX<S, D, kM, kN>(dkAcc, dp, sq); // dK += dS^T Q
        }
      });
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    fragmentsToTile<S, D>(dkAcc[m], a.scale, sk, r0 + 16 * m);
    fragmentsToTile<S, D>(dvAcc[m], 1.0f, sv, r0 + 16 * m);
  }
  __syncthreads();
  storeRows<S, D, kKeys>(sk, dk + kr.start, int(kr.ld), j0, g.sk);
  storeRows<S, D, kKeys>(sv, dv + kr.start, int(kr.ld), j0, g.sk);
}

/// The query pass. kM = 1: 64 queries a block, 16 a warp; kM = 2: 128
/// queries, 32 a warp, each key tile's columns in two slices of 32 (each K
/// and V fragment read from shared memory serving two row tiles: 40
/// ldmatrix a warp for 96 products of 16 queries where kM = 1 takes 56).
/// The same bytes either way, as the key pass's; a slice whose keys all
/// come after the warp's queries (causal) is skipped.
template <class S, int D, int kM, bool kDrop>
__global__ void __launch_bounds__(kAttnThreads, kGradBlocksPerSm<D, kM, kDrop>)
    attnGradQueriesMma(AttnArgs a, const S *q, const S *k, const S *v,
                       const float2 *stat, const S *dout, S *dq) {
  extern __shared__ float4 smem[];
  const common::AttentionDims &g = a.g;
  constexpr int kRows = kM * kAttnTile;        // queries of the block
  constexpr int kN = kNt / kM, kCols = 8 * kN; // a slice's n-tiles, keys
  constexpr int64_t kT = kTileElems<D>;
  S *sq = reinterpret_cast<S *>(smem), *sdo = sq + kM * kT,
    *skv = sdo + kM * kT;
  int64_t b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kRows;
  int64_t kvh = h / g.group;
  int64_t stat0 = (b * g.hq + h) * g.s; // stat's first row of the head
  HeadRows qr = queryRows(g, b, h), kr = keyRows(g, b, kvh, g.d),
           orow = outRows(g, b, h);
  int r0 = 16 * kM * (threadIdx.x / 32), gr = threadIdx.x % 32 / 4;
  int64_t iw = i0 + r0; // the warp's first query
  loadRowsAsync<S, D, kRows>(q + qr.start, int(qr.ld), i0, g.s, sq);
  loadRowsAsync<S, D, kRows>(dout + orow.start, int(orow.ld), i0, g.s, sdo);
  float2 rowStat[kM][2]; // (offset, Dsum) of the thread's rows
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      int64_t i = iw + 16 * m + gr + 8 * half;
      rowStat[m][half] =
          i < g.s ? stat[stat0 + i] : make_float2(INFINITY, 0.0f);
    }
  float dqAcc[kM][D / 8][4] = {};
  int64_t jEnd = a.causal ? min(g.sk, i0 + kRows) : g.sk;
  forKeyTiles<S, D>(k + kr.start, v + kr.start, int(kr.ld), g.sk, jEnd, skv,
                    [&](int64_t j0, const S *skt, const S *svt) {
#pragma unroll
                      for (int c = 0; c < kAttnTile; c += kCols) {
                        if (causalHidesAll(a, iw, j0 + c, 16 * kM))
                          continue;
                        const S *sk = skt + c * kLd<D>, *sv = svt + c * kLd<D>;
                        float s[kM][kN][4], dp[kM][kN][4], kf[kM];
                        productABt<S, D, kM, kN>(s, sq, r0, sk);
                        bool mask =
                            tileNeedsMask(a, iw, j0 + c, 16 * kM, kCols);
#pragma unroll
                        for (int m = 0; m < kM; ++m)
                          kf[m] = scaleAndMask<S, false, kN>(
                              s[m], a, b, h, iw + 16 * m, j0 + c, mask);
                        productABt<S, D, kM, kN>(dp, sdo, r0, sv);
#pragma unroll
                        for (int m = 0; m < kM; ++m)
                          probsAndDs(
                              s[m], dp[m], kf[m],
                              [&](int, int e) { return rowStat[m][e / 2]; },
                              [&](int nt, int e) {
                                return fragmentDropFactor<false, kDrop>(
                                    a, b, h, iw + 16 * m, j0 + c, nt, e);
                              });
                        accumulatePX<S, D, kM, kN>(dqAcc, dp, sk); // dQ += dS K
                      }
                    });
#pragma unroll
  for (int m = 0; m < kM; ++m)
    fragmentsToTile<S, D>(dqAcc[m], a.scale, sq, r0 + 16 * m);
  __syncthreads();
  storeRows<S, D, kRows>(sq, dq + qr.start, int(qr.ld), i0, g.s);
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

/// Calls f(Tag<S>{}, std::integral_constant<int, D>{},
/// std::bool_constant<kDrop>{}) for the dtype, head dim and dropout
/// (attentionOnTensorCores said yes).
template <class F>
Status visitMma(const char *op, DType t, int64_t d, bool dropout, F &&f) {
  auto withDim = [&](auto tag) -> Status {
    auto withDrop = [&](auto dim) -> Status {
      if (dropout)
        return f(tag, dim, std::true_type{});
      return f(tag, dim, std::false_type{});
    };
    switch (d) {
    case 32:
      return withDrop(std::integral_constant<int, 32>{});
    case 64:
      return withDrop(std::integral_constant<int, 64>{});
    case 96:
      return withDrop(std::integral_constant<int, 96>{});
    case 128:
      return withDrop(std::integral_constant<int, 128>{});
    default:
      return fail(op,
                  "no tensor-core kernel for head dim " + std::to_string(d));
    }
  };
  if (t == DType::BF16)
    return withDim(Tag<__nv_bfloat16>{});
  if (t == DType::F16)
    return withDim(Tag<__half>{});
  return unsupported(op, t);
}

} // namespace

bool attentionOnTensorCores(DType t, int64_t d, int64_t dv, float scale,
                            std::initializer_list<const TensorRef *> tensors) {
  if (t != DType::F16 && t != DType::BF16)
    return false;
  if (!(scale > 0.0f)) // the softmax's maxima are taken before the scale
    return false;
  if (d != dv || (d != 32 && d != 64 && d != 96 && d != 128))
    return false;
  for (const TensorRef *x : tensors) {
    if (x->numel() > 0 && reinterpret_cast<uintptr_t>(x->data) % 16 != 0)
      return false;
    // A tile's element offsets (128 rows of up to the last two dims' width
    // apart, bshd's row stride) are 32-bit.
    if (x->rank() >= 2 &&
        x->shape[x->rank() - 1] * x->shape[x->rank() - 2] >
            std::numeric_limits<int32_t>::max() / (2 * kAttnTile))
      return false;
  }
  return true;
}

namespace {

/// setting = rows (64 or 128), or a failure of op saying "<what> takes 64
/// or 128 <unit> a block, not <rows>".
Status setBlockRows(int &setting, int rows, const char *op, const char *what,
                    const char *unit) {
  if (rows != kAttnTile && rows != 2 * kAttnTile)
    return fail(op, std::string(what) + " takes 64 or 128 " + unit +
                        " a block, not " + std::to_string(rows));
  setting = rows;
  return Status::success();
}

} // namespace

Status setAttentionForwardRows(Context &ctx, int rows) {
  return setBlockRows(ctx.attentionForwardRows, rows, "attention",
                      "the forward", "queries");
}

Status setAttentionGradRows(Context &ctx, int rows) {
  return setBlockRows(ctx.attentionGradRows, rows, "attention_grad",
                      "the backward", "keys (or queries)");
}

Status setAttentionWgmma(Context &ctx, bool forward, bool backward) {
  if (forward || backward)
    SMP_RETURN_IF_ERROR(
        requireHopper("attention",
                      forward && backward ? "the attention on wgmma"
                      : forward           ? "the attention forward on wgmma"
                                          : "the attention backward on wgmma",
                      ctx.device));
  ctx.attentionWgmmaForward = forward;
  ctx.attentionWgmmaBackward = backward;
  return Status::success();
}

namespace detail {

Status attentionMma(const char *op, const AttnArgs &a, DType t,
                    const Context &ctx, const TensorRef &q, const TensorRef &k,
                    const TensorRef &v, const TensorRef &out,
                    const TensorRef &lse) {
  const common::AttentionDims &g = a.g;
  return visitMma(op, t, g.d, a.dropout, [&](auto tag, auto dim, auto drop) {
    using S = typename decltype(tag)::type;
    constexpr int D = decltype(dim)::value;
    constexpr bool kDrop = decltype(drop)::value;
    if constexpr (D == 64 && !kDrop)
      if (ctx.attentionWgmmaForward && g.dv == 64)
        return attentionForwardWgmma(op, a, t, ctx, q, k, v, out, lse);
    if constexpr (D <= 64)
      if (ctx.attentionForwardRows == 2 * kAttnTile)
        return launchTiles(op, attnForwardMma<S, D, 2, kDrop>,
                           6 * tileBytes<D>(), g.s, 2 * kAttnTile, g.hq,
                           kAttnThreads, g, ctx, a, q.as<S>(), k.as<S>(),
                           v.as<S>(), out.as<S>(), lse.as<float>());
    return launchTiles(op, attnForwardMma<S, D, 1, kDrop>, 5 * tileBytes<D>(),
                       g.s, kAttnTile, g.hq, kAttnThreads, g, ctx, a, q.as<S>(),
                       k.as<S>(), v.as<S>(), out.as<S>(), lse.as<float>());
  });
}

/// The backward's two passes with kM 64-row tiles a block (after attnDsum,
/// which wrote stat).
template <class S, int D, int kM, bool kDrop>
Status launchGradPasses(const char *op, const AttnArgs &a, const Context &ctx,
                        const TensorRef &q, const TensorRef &k,
                        const TensorRef &v, const Scratch &stat,
                        const TensorRef &dout, const TensorRef &dq,
                        const TensorRef &dk, const TensorRef &dv) {
  const common::AttentionDims &g = a.g;
  // A block's own tiles (kM rows of 64 each: keys and values, or queries
  // and their output gradients) and two buffers of the tiles it walks.
  size_t bytes = (2 * kM + 4) * tileBytes<D>();
  if (dk.numel() > 0 || dv.numel() > 0)
    SMP_RETURN_IF_ERROR(launchTiles(
        op, attnGradKeysMma<S, D, kM, kDrop>,
        bytes + 2 * kAttnTile * sizeof(float2), g.sk, kM * kAttnTile, g.hkv,
        kAttnThreads, g, ctx, a, q.as<S>(), k.as<S>(), v.as<S>(),
        stat.as<const float2>(), dout.as<S>(), dk.as<S>(), dv.as<S>()));
  if (dq.numel() == 0)
    return Status::success();
  return launchTiles(op, attnGradQueriesMma<S, D, kM, kDrop>, bytes, g.s,
                     kM * kAttnTile, g.hq, kAttnThreads, g, ctx, a, q.as<S>(),
                     k.as<S>(), v.as<S>(), stat.as<const float2>(),
                     dout.as<S>(), dq.as<S>());
}

Status attentionGradMma(const char *op, const AttnArgs &a, DType t,
                        const Context &ctx, const TensorRef &q,
                        const TensorRef &k, const TensorRef &v,
                        const TensorRef &out, const TensorRef &lse,
                        const TensorRef &dout, const TensorRef &dq,
                        const TensorRef &dk, const TensorRef &dv) {
  const common::AttentionDims &g = a.g;
  int64_t rows = g.b * g.hq * g.s;
  Scratch stat; // a float2 a query row: attnDsum's
  SMP_RETURN_IF_ERROR(stat.allocate(
      op, sizeof(float2) * static_cast<size_t>(rows), ctx.stream));
  return visitMma(
      op, t, g.d, a.dropout, [&](auto tag, auto dim, auto drop) -> Status {
        using S = typename decltype(tag)::type;
        constexpr int D = decltype(dim)::value;
        constexpr bool kDrop = decltype(drop)::value;
        if (rows > 0) {
          constexpr int kRowThreads = 256;
          attnDsum<S, D>
              <<<blocksOf(rows * 8, kRowThreads), kRowThreads, 0, ctx.stream>>>(
                  g, out.as<S>(), dout.as<S>(), lse.as<float>(),
                  stat.as<float2>(), rows);
          SMP_RETURN_IF_ERROR(launchStatus(op));
        }
        if constexpr (D == 64 && !kDrop)
          if (ctx.attentionWgmmaBackward && g.dv == 64)
            return attentionGradWgmma(op, a, t, ctx, q, k, v,
                                      stat.as<const float2>(), dout, dq, dk,
                                      dv);
        if constexpr (D <= 64 && !kDrop)
          if (ctx.attentionGradRows == 2 * kAttnTile)
            return launchGradPasses<S, D, 2, kDrop>(op, a, ctx, q, k, v, stat,
                                                    dout, dq, dk, dv);
        return launchGradPasses<S, D, 1, kDrop>(op, a, ctx, q, k, v, stat, dout,
                                                dq, dk, dv);
      });
}

} // namespace detail
} // namespace smp::kernels::cuda
