//===- AttentionWgmmaGrad.cu - The attention backward on Hopper's wgmma ---===//
//
// AttentionMma.cu's two deterministic backward passes (64 rows a block,
// after its attnDsum kernel wrote each query row's (offset, Dsum)) with
// their products on wgmma.mma_async (Wgmma.cuh) instead of mma.sync: the
// block's four warps are one warpgroup, each warp its 16 rows as before,
// and the tensor cores read every tile from shared memory themselves (the
// mma.sync passes were bound by their ldmatrix loads, docs/benchmarks.md).
// Every tile lies in shared memory in row groups (AttentionWgmma.cuh) and
// is read K-major or MN-major as each product needs:
//
//   keys:    a block per (64 keys, key/value head, batch), over the query
//            tiles of every head of the group: S^T = K Q^T and dP^T = V
//            dO^T (eight products, both operands in shared memory), P^T
//            from S^T (the column's query statistics), dV += P^T dO with
//            P^T from registers while dS^T = P^T (dP^T - Dsum) is computed,
//            then dK += dS^T Q (Q and dO read MN-major);
//   queries: a block per (64 queries, head, batch), over the key tiles:
//            S = Q K^T and dP = dO V^T, P, dS, dQ += dS K (K MN-major).
//
// Each pass commits its products in groups and waits for a group only
// when its accumulators are read, so the tensor cores compute dP (dP^T)
// while the warps exponentiate S, and dV while they compute dS^T. The
// same operations on every element as the mma.sync passes (the emulator
// sums each product in mma.sync's order: the same bits there). D = Dv =
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
/// The key pass: K and V (each also staging dK or dV at the end), two
/// buffers of (Q, dO), two of 64 query statistics.
constexpr size_t kKeySharedBytes =
    2 * kStageBytes + 4 * kCoreTileBytes + 2 * kAttnTile * sizeof(float2);
/// The query pass: Q (staging dQ at the end), dO, two buffers of (K, V).
constexpr size_t kQuerySharedBytes =
    kStageBytes + kCoreTileBytes + 4 * kCoreTileBytes;

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

/// The key pass: the warp's rows are keys (S^T's columns queries).
template <class S>
__global__ void __launch_bounds__(kAttnThreads, 2)
    attnGradKeysWgmma(AttnArgs a, const S *q, const S *k, const S *v,
                      const float2 *stat, const S *dout, S *dk, S *dv) {
  extern __shared__ __align__(128) unsigned char shared[];
  const common::AttentionDims &g = a.g;
  unsigned char *sk = shared, *sv = sk + kStageBytes,
                *sqdo = sv + kStageBytes; // q0 do0 q1 do1
  float2 *sStat = reinterpret_cast<float2 *>(sqdo + 4 * kCoreTileBytes);
  int64_t b = blockIdx.z, kvh = blockIdx.y,
          j0 = int64_t(blockIdx.x) * kAttnTile;
  HeadRows kr = keyRows(g, b, kvh, g.d);
  int r0 = 16 * (threadIdx.x / 32), t = threadIdx.x % 4;
  int64_t jw = j0 + r0; // the warp's first key
  loadCoreTileAsync<S>(k + kr.start, int(kr.ld), j0, g.sk, sk);
  loadCoreTileAsync<S>(v + kr.start, int(kr.ld), j0, g.sk, sv);
  float dkAcc[kD / 8][4] = {}, dvAcc[kD / 8][4] = {};
  int64_t iStart = a.causal ? j0 : 0;
  QueryTileWalk next{kvh * g.group, iStart}, cur = next;
  // The descriptors of K and V, and of buffer 0's Q and dO each way
  // (buffer 1's: 2 kCoreTileBytes on).
  uint64_t descK = kMajorTile(sk), descV = kMajorTile(sv),
           descQ0 = kMajorTile(sqdo),
           descDo0 = kMajorTile(sqdo + kCoreTileBytes),
           descQT0 = mnMajorTile(sqdo),
           descDoT0 = mnMajorTile(sqdo + kCoreTileBytes);
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
        loadCoreTileAsync<S>(qh, qld, i0, g.s, tq);
        loadCoreTileAsync<S>(doh, dold, i0, g.s, tq + kCoreTileBytes);
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
        uint32_t at = 2 * buf * kCoreTileBytes;
        // The (offset, Dsum) of the thread's 16 columns' queries (8 nt + 2
        // t and the next), read once (the products' memory clobbers would
        // have them read again after each).
        const float2 *st = sStat + buf * kAttnTile;
        float4 cs[kNt];
#pragma unroll
        for (int nt = 0; nt < kNt; ++nt)
          cs[nt] = *reinterpret_cast<const float4 *>(st + nt * 8 + 2 * t);
        auto colStat = [&](int nt, int e) {
          return e % 2 ? make_float2(cs[nt].z, cs[nt].w)
                       : make_float2(cs[nt].x, cs[nt].y);
        };
        int64_t h = cur.h, i0 = cur.i0;
        cur.advance(iStart, g.s);
        float s[kNt][4], dp[kNt][4];
        wgmmaFence();
        issueABt<S>(s, descK, wgmmaAdvance(descQ0, at)); // S^T = K Q^T
        wgmmaCommit();
        issueABt<S>(dp, descV, wgmmaAdvance(descDo0, at)); // dP^T = V dO^T
        wgmmaCommit();
        wgmmaWait<1>();
        wgmmaFenceOperands(flat(s));
        float kf = scaleAndMask<S, true>(
            s, a, b, h, jw, i0, tileNeedsMask(a, i0, jw, kAttnTile, 16));
        probabilities(s, kf, colStat);
        uint32_t p[kAttnTile / 16][4], ds[kAttnTile / 16][4];
        packRows<S>(p, s);
        wgmmaFence();
        issuePX<S>(dvAcc, p, wgmmaAdvance(descDoT0, at)); // dV += P^T dO
        wgmmaCommit();
        wgmmaWait<1>();
        wgmmaFenceOperands(flat(dp));
        scoreGradients(dp, s, colStat);
        packRows<S>(ds, dp);
        wgmmaFence();
        issuePX<S>(dkAcc, ds, wgmmaAdvance(descQT0, at)); // dK += dS^T Q
        wgmmaCommit();
        wgmmaWait<0>();
        wgmmaFenceOperands(flat(dvAcc));
        wgmmaFenceOperands(flat(dkAcc));
        wgmmaKeepOperands(p);
        wgmmaKeepOperands(ds);
      },
      [] { fenceProxyAsync(); });
  fragmentsToTile<S, kD>(dkAcc, a.scale, reinterpret_cast<S *>(sk), r0);
  fragmentsToTile<S, kD>(dvAcc, 1.0f, reinterpret_cast<S *>(sv), r0);
  __syncthreads();
  storeRows<S, kD>(reinterpret_cast<const S *>(sk), dk + kr.start, int(kr.ld),
                   j0, g.sk);
  storeRows<S, kD>(reinterpret_cast<const S *>(sv), dv + kr.start, int(kr.ld),
                   j0, g.sk);
}

/// The query pass: the warp's rows are queries.
template <class S>
__global__ void __launch_bounds__(kAttnThreads, 3)
    attnGradQueriesWgmma(AttnArgs a, const S *q, const S *k, const S *v,
                         const float2 *stat, const S *dout, S *dq) {
  extern __shared__ __align__(128) unsigned char shared[];
  const common::AttentionDims &g = a.g;
  unsigned char *sq = shared, *sdo = sq + kStageBytes,
                *skv = sdo + kCoreTileBytes; // k0 v0 k1 v1
  int64_t b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kAttnTile;
  int64_t kvh = h / g.group;
  int64_t stat0 = (b * g.hq + h) * g.s; // stat's first row of the head
  HeadRows qr = queryRows(g, b, h), kr = keyRows(g, b, kvh, g.d),
           orow = outRows(g, b, h);
  int r0 = 16 * (threadIdx.x / 32), gr = threadIdx.x % 32 / 4;
  int64_t iw = i0 + r0; // the warp's first query
  loadCoreTileAsync<S>(q + qr.start, int(qr.ld), i0, g.s, sq);
  loadCoreTileAsync<S>(dout + orow.start, int(orow.ld), i0, g.s, sdo);
  float2 rowStat[2]; // (offset, Dsum) of the thread's rows
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int64_t i = iw + gr + 8 * half;
    rowStat[half] = i < g.s ? stat[stat0 + i] : make_float2(INFINITY, 0.0f);
  }
  auto rowOf = [&](int, int e) { return rowStat[e / 2]; };
  // The descriptors of Q and dO, and of buffer 0's K and V (buffer 1's: 2
  // kCoreTileBytes on).
  uint64_t descQ = kMajorTile(sq), descDo = kMajorTile(sdo),
           descK0 = kMajorTile(skv), descKT0 = mnMajorTile(skv),
           descV0 = kMajorTile(skv + kCoreTileBytes);
  float dqAcc[kD / 8][4] = {};
  int64_t jEnd = a.causal ? min(g.sk, i0 + kAttnTile) : g.sk;
  const S *kh = k + kr.start, *vh = v + kr.start;
  forCoreKeyTiles(
      kh, vh, int(kr.ld), g.sk, jEnd, skv, [&](int64_t j0, uint32_t at) {
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
  fragmentsToTile<S, kD>(dqAcc, a.scale, reinterpret_cast<S *>(sq), r0);
  __syncthreads();
  storeRows<S, kD>(reinterpret_cast<const S *>(sq), dq + qr.start, int(qr.ld),
                   i0, g.s);
}

template <class S>
Status launchGradWgmma(const char *op, const AttnArgs &a, const Context &ctx,
                       const TensorRef &q, const TensorRef &k,
                       const TensorRef &v, const float2 *stat,
                       const TensorRef &dout, const TensorRef &dq,
                       const TensorRef &dk, const TensorRef &dv) {
  const common::AttentionDims &g = a.g;
  if (dk.numel() > 0 || dv.numel() > 0)
    SMP_RETURN_IF_ERROR(
        launchTiles(op, attnGradKeysWgmma<S>, kKeySharedBytes, g.sk, kAttnTile,
                    g.hkv, kAttnThreads, g, ctx, a, q.as<S>(), k.as<S>(),
                    v.as<S>(), stat, dout.as<S>(), dk.as<S>(), dv.as<S>()));
  if (dq.numel() == 0)
    return Status::success();
  return launchTiles(op, attnGradQueriesWgmma<S>, kQuerySharedBytes, g.s,
                     kAttnTile, g.hq, kAttnThreads, g, ctx, a, q.as<S>(),
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
  if (t == DType::BF16)
    return launchGradWgmma<__nv_bfloat16>(name.c_str(), a, ctx, q, k, v, stat,
                                          dout, dq, dk, dv);
  return launchGradWgmma<__half>(name.c_str(), a, ctx, q, k, v, stat, dout, dq,
                                 dk, dv);
}

} // namespace detail
} // namespace smp::kernels::cuda
