//===- AttentionWgmmaGrad.cu - The attention backward on Hopper's wgmma ---===//
//
// AttentionMma.cu's two deterministic backward passes (after its attnDsum
// kernel wrote each query row's (offset, Dsum)) with their products on
// wgmma.mma_async (Wgmma.cuh) instead of mma.sync: each warpgroup of a
// block (one, or two with setAttentionGradRows(128), sharing the tiles the
// block walks: half the copies a row) its 64 rows, each warp 16 as before,
// and the tensor cores read every tile from shared memory themselves (the
// mma.sync passes were bound by their ldmatrix loads, docs/benchmarks.md).
// Every tile lies in shared memory in row groups (AttentionWgmma.cuh) and
// is read K-major or MN-major as each product needs:
//
//   keys:    a block per (64 keys a warpgroup, key/value head, batch),
//            over the query tiles of every head of the group: S^T = K Q^T
//            and dP^T = V dO^T (eight products, both operands in shared
//            memory), P^T from S^T (the column's query statistics), dV +=
//            P^T dO with P^T from registers while dS^T = P^T (dP^T - Dsum)
//            is computed, then dK += dS^T Q (Q and dO read MN-major);
//   queries: a block per (64 queries a warpgroup, head, batch), over the
//            key tiles:
//            S = Q K^T and dP = dO V^T, P, dS, dQ += dS K (K MN-major).
//
// Each pass commits its products in groups and waits for a group only
// when its accumulators are read, so the tensor cores compute dP (dP^T)
// while the warps exponentiate S, and dV while they compute dS^T. The
// same operations on every element as the mma.sync passes (the emulator
// sums each product in mma.sync's order: the same bits there), whatever
// the block's rows (a tile a warpgroup leaves has P and dS all 0). D = Dv =
// 64, f16/bf16, no dropout, on a compute-capability-9.0 GPU; an option
// (setAttentionWgmma, SMP_ATTENTION_WGMMA=1 or backward) until a GPU says
// it is faster.
//
// Built for sm_90a alone (smp_kernels_cuda_wgmma); the emulator runs it
// through its wgmma (kernels/cudaemu/Wgmma.cpp).
//
//===----------------------------------------------------------------------===//

#include "Attention.cuh"
#include "AttentionFragments.cuh"
#include "AttentionWgmma.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

constexpr int kD = kWgD;
/// The key pass with kWg warpgroups of 64 keys a block: their K and V
/// (each also staging dK or dV at the end), two buffers of (Q, dO), two of
/// 64 query statistics.
template <int kWg>
constexpr size_t kKeySharedBytes = 2 * kWg *kStageBytes + 4 * kCoreTileBytes +
                                   2 * kAttnTile * sizeof(float2);
/// The query pass with kWg warpgroups of 64 queries: their Q (staging dQ
/// at the end) and dO, two buffers of (K, V).
template <int kWg>
constexpr size_t kQuerySharedBytes = kWg *(kStageBytes + kCoreTileBytes) +
                                     4 * kCoreTileBytes;

/// s (scaleAndMask's scores and factor k) becomes P = 2^(s k - offset),
/// `stat(nt, e)` giving the element's query's (offset, Dsum).
template <class F>
__device__ inline void probabilities(float (&s)[kNt][4], float k, F stat) {
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      s[nt][e] = exp2Fast(fmaf(s[nt][e], k, -stat(nt, e).x));
}

/// dp becomes dS = P (dP - Dsum) (AttentionMma.cu's probsAndDs without a
/// dropout, in two steps).
template <class F>
__device__ inline void scoreGradients(float (&dp)[kNt][4],
                                      const float (&p)[kNt][4], F stat) {
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dp[nt][e] = p[nt][e] * (dp[nt][e] - stat(nt, e).y);
}

/// The descriptors of a key-pass warpgroup's tiles: its K and V (A,
/// K-major), and buffer 0's Q and dO read K-major (S^T's and dP^T's B) and
/// MN-major (dK's and dV's B); buffer 1's are 2 kCoreTileBytes on.
struct KeyPassTiles {
  uint64_t k, v, q, dout, qMn, doutMn;
};

/// One query tile of the key pass for the warpgroup (its warp's keys from
/// jw): dV += P^T dO and dK += dS^T Q, `at` the tile's buffer's offset,
/// `cs` the (offset, Dsum) pairs of the thread's columns (queries 8 nt + 2
/// t and the next) from i0.
template <class S>
__device__ void keyPassTile(const AttnArgs &a, int64_t b, int64_t h, int64_t i0,
                            int64_t jw, const KeyPassTiles &d, uint32_t at,
                            const float4 (&cs)[kNt], float (&dkAcc)[kNt][4],
                            float (&dvAcc)[kNt][4]) {
  auto colStat = [&](int nt, int e) {
    return e % 2 ? make_float2(cs[nt].z, cs[nt].w)
                 : make_float2(cs[nt].x, cs[nt].y);
  };
  float s[kNt][4], dp[kNt][4];
  wgmmaFence();
  issueABt<S>(s, d.k, wgmmaAdvance(d.q, at)); // S^T = K Q^T
  wgmmaCommit();
  issueABt<S>(dp, d.v, wgmmaAdvance(d.dout, at)); // dP^T = V dO^T
  wgmmaCommit();
  wgmmaWait<1>();
  wgmmaFenceOperands(flat(s));
  float kf = scaleAndMask<S, true>(s, a, b, h, jw, i0,
                                   tileNeedsMask(a, i0, jw, kAttnTile, 16));
  probabilities(s, kf, colStat);
  uint32_t p[kAttnTile / 16][4], ds[kAttnTile / 16][4];
  packRows<S>(p, s);
  wgmmaFence();
  issuePX<S>(dvAcc, p, wgmmaAdvance(d.doutMn, at)); // dV += P^T dO
  wgmmaCommit();
  wgmmaWait<1>();
  wgmmaFenceOperands(flat(dp));
  scoreGradients(dp, s, colStat);
  packRows<S>(ds, dp);
  wgmmaFence();
  issuePX<S>(dkAcc, ds, wgmmaAdvance(d.qMn, at)); // dK += dS^T Q
  wgmmaCommit();
  wgmmaWait<0>();
  wgmmaFenceOperands(flat(dvAcc));
  wgmmaFenceOperands(flat(dkAcc));
  wgmmaKeepOperands(p);
  wgmmaKeepOperands(ds);
}

/// The key pass: the warp's rows are keys (S^T's columns queries); kWg
/// warpgroups of 64 keys a block sharing the query tiles it walks (two
/// halve the tiles' copies a key). A warpgroup whose keys all come after a
/// tile's queries (causal) leaves the tile to the other.
template <class S, int kWg>
__global__ void __launch_bounds__(kWg *kAttnThreads, 2 / kWg)
    attnGradKeysWgmma(AttnArgs a, const S *q, const S *k, const S *v,
                      const float2 *stat, const S *dout, S *dk, S *dv) {
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kKeys = kWg * kAttnTile, kThreads = kWg * kAttnThreads;
  const common::AttentionDims &g = a.g;
  // K0 [K1], V0 [V1], then q0 do0 q1 do1, then the statistics.
  unsigned char *sk = shared, *sv = sk + kWg * kStageBytes,
                *sqdo = sv + kWg * kStageBytes;
  float2 *sStat = reinterpret_cast<float2 *>(sqdo + 4 * kCoreTileBytes);
  int64_t b = blockIdx.z, kvh = blockIdx.y, j0 = int64_t(blockIdx.x) * kKeys;
  HeadRows kr = keyRows(g, b, kvh, g.d);
  int wg = warpgroupIndex<kWg>();
  int r0 = 16 * (threadIdx.x % kAttnThreads / 32), t = threadIdx.x % 4;
  int64_t jg = j0 + wg * kAttnTile, jw = jg + r0; // the warpgroup's, warp's
#pragma unroll
  for (int w = 0; w < kWg; ++w) {
    loadCoreTileAsync<S, kThreads>(k + kr.start, int(kr.ld), j0 + w * kAttnTile,
                                   g.sk, sk + w * kStageBytes);
    loadCoreTileAsync<S, kThreads>(v + kr.start, int(kr.ld), j0 + w * kAttnTile,
                                   g.sk, sv + w * kStageBytes);
  }
  float dkAcc[kD / 8][4] = {}, dvAcc[kD / 8][4] = {};
  int64_t iStart = a.causal ? j0 : 0;
  QueryTileWalk next{kvh * g.group, iStart}, cur = next;
  KeyPassTiles desc{kMajorTile(sk + wg * kStageBytes),
                    kMajorTile(sv + wg * kStageBytes),
                    kMajorTile(sqdo),
                    kMajorTile(sqdo + kCoreTileBytes),
                    mnMajorTile(sqdo),
                    mnMajorTile(sqdo + kCoreTileBytes)};
  // The head the copies read: its rows of q and dout and its statistics,
  // found again only when the walk moves to the next head (their 64-bit
  // offsets had been some 60 instructions a tile).
  int64_t head = -1;
  const S *qh = nullptr, *doh = nullptr;
  const float2 *sth = nullptr;
  int qld = 0, dold = 0;
  pipelined(
      tilesFrom(iStart, g.s) * static_cast<int>(g.group),
      [&](int, int buf) {
        int64_t i0 = next.i0;
        if (next.h != head) {
          head = next.h;
          HeadRows qr = queryRows(g, b, head), orow = outRows(g, b, head);
          qh = q + qr.start, qld = int(qr.ld);
          doh = dout + orow.start, dold = int(orow.ld);
          sth = stat + (b * g.hq + head) * g.s;
        }
        next.advance(iStart, g.s);
        unsigned char *tq = sqdo + 2 * buf * kCoreTileBytes;
        loadCoreTileAsync<S, kThreads>(qh, qld, i0, g.s, tq);
        loadCoreTileAsync<S, kThreads>(doh, dold, i0, g.s, tq + kCoreTileBytes);
        if (threadIdx.x < kAttnTile) {
          int64_t i = i0 + threadIdx.x;
          float2 *st = sStat + buf * kAttnTile + threadIdx.x;
          if (i < g.s)
            cpAsync<8>(st, sth + i);
          else // no query: every probability 0
            *st = make_float2(INFINITY, 0.0f);
        }
      },
      [&](int, int buf) {
        int64_t h = cur.h, i0 = cur.i0;
        cur.advance(iStart, g.s);
        if (kWg > 1 && causalHidesAll(a, i0, jg, kAttnTile))
          return; // P^T and dS^T all 0
        // The (offset, Dsum) of the thread's 16 columns' queries, read
        // once (the products' memory clobbers would have them read again
        // after each).
        const float2 *st = sStat + buf * kAttnTile;
        float4 cs[kNt];
#pragma unroll
        for (int nt = 0; nt < kNt; ++nt)
          cs[nt] = *reinterpret_cast<const float4 *>(st + nt * 8 + 2 * t);
        keyPassTile<S>(a, b, h, i0, jw, desc, 2 * buf * kCoreTileBytes, cs,
                       dkAcc, dvAcc);
      },
      [] { fenceProxyAsync(); });
  fragmentsToTile<S, kD>(dkAcc, a.scale,
                         reinterpret_cast<S *>(sk + wg * kStageBytes), r0);
  fragmentsToTile<S, kD>(dvAcc, 1.0f,
                         reinterpret_cast<S *>(sv + wg * kStageBytes), r0);
  __syncthreads();
  storeRows<S, kD, kKeys, kThreads>(reinterpret_cast<const S *>(sk),
                                    dk + kr.start, int(kr.ld), j0, g.sk);
  storeRows<S, kD, kKeys, kThreads>(reinterpret_cast<const S *>(sv),
                                    dv + kr.start, int(kr.ld), j0, g.sk);
}

/// The query pass: the warp's rows are queries; kWg warpgroups of 64
/// queries a block sharing the key tiles it walks. A warpgroup whose
/// queries all come before a tile's keys (causal) leaves the tile to the
/// other.
template <class S, int kWg>
__global__ void __launch_bounds__(kWg *kAttnThreads, kWg == 1 ? 3 : 1)
    attnGradQueriesWgmma(AttnArgs a, const S *q, const S *k, const S *v,
                         const float2 *stat, const S *dout, S *dq) {
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kRows = kWg * kAttnTile, kThreads = kWg * kAttnThreads;
  const common::AttentionDims &g = a.g;
  // Q0 [Q1], dO0 [dO1], then k0 v0 k1 v1.
  unsigned char *sq = shared, *sdo = sq + kWg * kStageBytes,
                *skv = sdo + kWg * kCoreTileBytes;
  int64_t b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kRows;
  int64_t kvh = h / g.group;
  int64_t stat0 = (b * g.hq + h) * g.s; // stat's first row of the head
  HeadRows qr = queryRows(g, b, h), kr = keyRows(g, b, kvh, g.d),
           orow = outRows(g, b, h);
  int wg = warpgroupIndex<kWg>();
  int r0 = 16 * (threadIdx.x % kAttnThreads / 32), gr = threadIdx.x % 32 / 4;
  int64_t ig = i0 + wg * kAttnTile, iw = ig + r0; // the warpgroup's, warp's
#pragma unroll
  for (int w = 0; w < kWg; ++w) {
    loadCoreTileAsync<S, kThreads>(q + qr.start, int(qr.ld), i0 + w * kAttnTile,
                                   g.s, sq + w * kStageBytes);
    loadCoreTileAsync<S, kThreads>(dout + orow.start, int(orow.ld),
                                   i0 + w * kAttnTile, g.s,
                                   sdo + w * kCoreTileBytes);
  }
  float2 rowStat[2]; // (offset, Dsum) of the thread's rows
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int64_t i = iw + gr + 8 * half;
    rowStat[half] = i < g.s ? stat[stat0 + i] : make_float2(INFINITY, 0.0f);
  }
  auto rowOf = [&](int, int e) { return rowStat[e / 2]; };
  // The descriptors of the warpgroup's Q and dO, and of buffer 0's K and V
  // (buffer 1's: 2 kCoreTileBytes on).
  uint64_t descQ = kMajorTile(sq + wg * kStageBytes),
           descDo = kMajorTile(sdo + wg * kCoreTileBytes),
           descK0 = kMajorTile(skv), descKT0 = mnMajorTile(skv),
           descV0 = kMajorTile(skv + kCoreTileBytes);
  float dqAcc[kD / 8][4] = {};
  int64_t jEnd = a.causal ? min(g.sk, i0 + kRows) : g.sk;
  const S *kh = k + kr.start, *vh = v + kr.start;
  forCoreKeyTiles<S, kThreads>(
      kh, vh, int(kr.ld), g.sk, jEnd, skv, [&](int64_t j0, uint32_t at) {
        if (kWg > 1 && causalHidesAll(a, ig, j0, kAttnTile))
          return; // P and dS all 0
        float s[kNt][4], dp[kNt][4];
        wgmmaFence();
        issueABt<S>(s, descQ, wgmmaAdvance(descK0, at)); // S = Q K^T
        wgmmaCommit();
        issueABt<S>(dp, descDo, wgmmaAdvance(descV0, at)); // dP = dO V^T
        wgmmaCommit();
        wgmmaWait<1>();
        wgmmaFenceOperands(flat(s));
        float kf = scaleAndMask<S, false>(s, a, b, h, iw, j0,
                                          tileNeedsMask(a, iw, j0, 16));
        probabilities(s, kf, rowOf);
        wgmmaWait<0>();
        wgmmaFenceOperands(flat(dp));
        scoreGradients(dp, s, rowOf);
        uint32_t ds[kAttnTile / 16][4];
        packRows<S>(ds, dp);
        wgmmaFence();
        issuePX<S>(dqAcc, ds, wgmmaAdvance(descKT0, at)); // dQ += dS K
        wgmmaCommit();
        wgmmaWait<0>();
        wgmmaFenceOperands(flat(dqAcc));
        wgmmaKeepOperands(ds);
      });
  fragmentsToTile<S, kD>(dqAcc, a.scale,
                         reinterpret_cast<S *>(sq + wg * kStageBytes), r0);
  __syncthreads();
  storeRows<S, kD, kRows, kThreads>(reinterpret_cast<const S *>(sq),
                                    dq + qr.start, int(qr.ld), i0, g.s);
}

template <class S, int kWg>
Status launchGradWgmma(const char *op, const AttnArgs &a, const Context &ctx,
                       const TensorRef &q, const TensorRef &k,
                       const TensorRef &v, const float2 *stat,
                       const TensorRef &dout, const TensorRef &dq,
                       const TensorRef &dk, const TensorRef &dv) {
  const common::AttentionDims &g = a.g;
  constexpr int kRows = kWg * kAttnTile, kThreads = kWg * kAttnThreads;
  if (dk.numel() > 0 || dv.numel() > 0)
    SMP_RETURN_IF_ERROR(
        launchTiles(op, attnGradKeysWgmma<S, kWg>, kKeySharedBytes<kWg>, g.sk,
                    kRows, g.hkv, kThreads, g, ctx, a, q.as<S>(), k.as<S>(),
                    v.as<S>(), stat, dout.as<S>(), dk.as<S>(), dv.as<S>()));
  if (dq.numel() == 0)
    return Status::success();
  return launchTiles(op, attnGradQueriesWgmma<S, kWg>, kQuerySharedBytes<kWg>,
                     g.s, kRows, g.hq, kThreads, g, ctx, a, q.as<S>(),
                     k.as<S>(), v.as<S>(), stat, dout.as<S>(), dq.as<S>());
}

} // namespace

namespace detail {

Status attentionGradWgmma(const char *op, const AttnArgs &a, DType t,
                          const Context &ctx, const TensorRef &q,
                          const TensorRef &k, const TensorRef &v,
                          const float2 *stat, const TensorRef &dout,
                          const TensorRef &dq, const TensorRef &dk,
                          const TensorRef &dv) {
  // Its launches and errors name the path ("packed_attention_grad on
  // wgmma").
  std::string name = std::string(op) + " on wgmma";
  bool two = ctx.attentionGradRows == 2 * kAttnTile;
  if (t == DType::BF16)
    return two ? launchGradWgmma<__nv_bfloat16, 2>(name.c_str(), a, ctx, q, k,
                                                   v, stat, dout, dq, dk, dv)
               : launchGradWgmma<__nv_bfloat16, 1>(name.c_str(), a, ctx, q, k,
                                                   v, stat, dout, dq, dk, dv);
  return two ? launchGradWgmma<__half, 2>(name.c_str(), a, ctx, q, k, v, stat,
                                          dout, dq, dk, dv)
             : launchGradWgmma<__half, 1>(name.c_str(), a, ctx, q, k, v, stat,
                                          dout, dq, dk, dv);
}

} // namespace detail
} // namespace smp::kernels::cuda
