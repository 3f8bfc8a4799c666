//===- AttentionWgmma.cu - The attention forward on Hopper's wgmma --------===//
//
// AttentionMma.cu's forward (FlashAttention-2: S = Q K^T, the online
// softmax in f32 registers, O += P V with P rounded to f16/bf16 in the
// registers) with its products on wgmma.mma_async (Wgmma.cuh) instead of
// mma.sync: each warpgroup of the block (one, or two with
// setAttentionForwardRows(128)) its 64 queries, each warp 16 as before,
// and the tensor cores read Q, K and V from shared memory themselves (no
// ldmatrix: the mma.sync forward spent more of its time loading fragments
// than multiplying, docs/benchmarks.md). S = Q K^T is four m64n64k16
// products over D = 64 with both operands in shared memory (K-major core
// matrices); O += P V four more with P's fragments in registers and V's
// tile read MN-major (AttentionWgmma.cuh). Two warpgroups share each K and
// V tile the block copies (half the copies a query); one whose queries all
// come before a tile's keys (causal) leaves it to the other. Each product
// group is waited for before its accumulators are read (the softmax
// between them needs S; the next tile's rescaling needs O); the tiles'
// copies are fenced for the tensor cores' (async) proxy before the barrier
// that hands them over. The accumulators are mma.sync's C fragments warp
// by warp, so the mask, softmax and output code is AttentionMma.cu's
// (AttentionFragments.cuh), and every row gets the same operations in the
// same order whatever the block's rows. D = Dv = 64, f16/bf16, no dropout,
// on a compute-capability-9.0 GPU; an option (setAttentionWgmma,
// SMP_ATTENTION_WGMMA=1 or forward) until a GPU says it is faster.
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

/// The block's shared memory: a Q tile a warpgroup (each also staging its
/// output rows at the end), two buffers of (K, V).
template <int kWg>
constexpr size_t kSharedBytes = kWg *kStageBytes + 4 * kCoreTileBytes;

/// kWg warpgroups of 64 queries a block (16 a warp), sharing the K and V
/// tiles the block walks: two halve the tiles' copies a query, which bound
/// the one-warpgroup block (docs/benchmarks.md). Four warpgroups an SM
/// either way.
template <class S, int kWg>
__global__ void __launch_bounds__(kWg *kAttnThreads, 4 / kWg)
    attnForwardWgmma(AttnArgs a, const S *q, const S *k, const S *v, S *out,
                     float *lse) {
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr int kRows = kWg * kAttnTile, kThreads = kWg * kAttnThreads;
  const common::AttentionDims &g = a.g;
  // Q0 [Q1], then k0 v0 k1 v1.
  unsigned char *sq = shared, *skv = shared + kWg * kStageBytes;
  int64_t b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kRows;
  int64_t kvh = h / g.group;
  int64_t stat0 = (b * g.hq + h) * g.s;
  HeadRows qr = queryRows(g, b, h), kr = keyRows(g, b, kvh, g.d);
  int wg = warpgroupIndex<kWg>();                  // the warpgroup
  int64_t iw = i0 + wg * kAttnTile;                // its first query
  int r0 = 16 * (threadIdx.x % kAttnThreads / 32); // the warp's first row
  unsigned char *wq = sq + wg * kStageBytes;       // its Q tile
#pragma unroll
  for (int w = 0; w < kWg; ++w)
    loadCoreTileAsync<S, kThreads>(q + qr.start, int(qr.ld), i0 + w * kAttnTile,
                                   g.s, sq + w * kStageBytes);
  float o[kD / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {};
  int64_t jEnd = a.causal ? min(g.sk, i0 + kRows) : g.sk;
  const S *kh = k + kr.start, *vh = v + kr.start;
  // The descriptors of Q and of buffer 0's K and V (buffer 1's: 2
  // kCoreTileBytes on).
  uint64_t descQ = kMajorTile(wq), descK0 = kMajorTile(skv),
           descV0 = mnMajorTile(skv + kCoreTileBytes);
  forCoreKeyTiles<S, kThreads>(
      kh, vh, int(kr.ld), g.sk, jEnd, skv, [&](int64_t j0, uint32_t at) {
        // Every key of the tile after every query of the warpgroup: its P
        // is 0 and leaves m, l and o as they are (the other warpgroup's
        // queries see the tile).
        if (kWg > 1 && causalHidesAll(a, iw, j0, kAttnTile))
          return;
        float s[kNt][4];
        wgmmaFence();
        issueABt<S>(s, descQ, wgmmaAdvance(descK0, at)); // S = Q K^T
        wgmmaCommit();
        wgmmaWait<0>();
        wgmmaFenceOperands(flat(s));
        float kf = scaleAndMask<S, false>(s, a, b, h, iw + r0, j0,
                                          tileNeedsMask(a, iw, j0));
        onlineSoftmax<kD>(s, kf, m, l, o);
        uint32_t p[kAttnTile / 16][4];
        packRows<S>(p, s);
        wgmmaFence();
        issuePX<S>(o, p, wgmmaAdvance(descV0, at)); // O += P V
        wgmmaCommit();
        wgmmaWait<0>();
        wgmmaFenceOperands(flat(o));
        wgmmaKeepOperands(p);
      });
  // The output rows as the 64-row forward writes them (each warpgroup's Q
  // buffer stages its rows, row-major; the buffers are adjacent).
  finishForwardRows<S, kD>(o, m, l, reinterpret_cast<S *>(wq), r0, iw + r0, g.s,
                           lse, stat0);
  __syncthreads();
  HeadRows orow = outRows(g, b, h);
  storeRows<S, kD, kRows, kThreads>(reinterpret_cast<const S *>(sq),
                                    out + orow.start, int(orow.ld), i0, g.s);
}

template <class S, int kWg>
Status launchForwardWgmma(const char *op, const AttnArgs &a, const Context &ctx,
                          const TensorRef &q, const TensorRef &k,
                          const TensorRef &v, const TensorRef &out,
                          const TensorRef &lse) {
  const common::AttentionDims &g = a.g;
  return launchTiles(op, attnForwardWgmma<S, kWg>, kSharedBytes<kWg>, g.s,
                     kWg * kAttnTile, g.hq, kWg * kAttnThreads, g, ctx, a,
                     q.as<S>(), k.as<S>(), v.as<S>(), out.as<S>(),
                     lse.as<float>());
}

} // namespace

namespace detail {

Status attentionForwardWgmma(const char *op, const AttnArgs &a, DType t,
                             const Context &ctx, const TensorRef &q,
                             const TensorRef &k, const TensorRef &v,
                             const TensorRef &out, const TensorRef &lse) {
  // Its launches and errors name the path ("packed_attention on wgmma").
  std::string name = std::string(op) + " on wgmma";
  op = name.c_str();
  bool two = ctx.attentionForwardRows == 2 * kAttnTile;
  if (t == DType::BF16)
    return two ? launchForwardWgmma<__nv_bfloat16, 2>(op, a, ctx, q, k, v, out,
                                                      lse)
               : launchForwardWgmma<__nv_bfloat16, 1>(op, a, ctx, q, k, v, out,
                                                      lse);
  return two ? launchForwardWgmma<__half, 2>(op, a, ctx, q, k, v, out, lse)
             : launchForwardWgmma<__half, 1>(op, a, ctx, q, k, v, out, lse);
}

} // namespace detail
} // namespace smp::kernels::cuda
