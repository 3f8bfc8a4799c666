//===- AttentionWgmma.cu - The attention forward on Hopper's wgmma --------===//
//
// AttentionMma.cu's 64-query forward (FlashAttention-2: S = Q K^T, the
// online softmax in f32 registers, O += P V with P rounded to f16/bf16 in
// the registers) with its products on wgmma.mma_async (Wgmma.cuh) instead
// of mma.sync: the block's four warps are one warpgroup, each warp its 16
// query rows as before, and the tensor cores read Q, K and V from shared
// memory themselves (no ldmatrix: the mma.sync forward spent more of its
// time loading fragments than multiplying, docs/benchmarks.md). S = Q K^T
// is four m64n64k16 products over D = 64 with both operands in shared
// memory (K-major core matrices); O += P V four more with P's fragments in
// registers and V's tile read MN-major (AttentionWgmma.cuh). Each product group
// is waited for before its accumulators are read (the softmax between them
// needs S; the next tile's rescaling needs O); the tiles' copies are fenced for
// the tensor cores' (async) proxy before the barrier that hands them over. The
// accumulators are mma.sync's C fragments warp by warp, so the mask, softmax
// and output code is AttentionMma.cu's (AttentionFragments.cuh). D = Dv = 64,
// f16/bf16, no dropout, on a compute-capability-9.0 GPU; an option
// (setAttentionWgmma, SMP_ATTENTION_WGMMA=1) until a GPU says it is faster.
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
/// Q's buffer also stages the output rows at the end.
constexpr size_t kSharedBytes = kStageBytes + 4 * kCoreTileBytes;

template <class S>
__global__ void __launch_bounds__(kAttnThreads, 4)
    attnForwardWgmma(AttnArgs a, const S *q, const S *k, const S *v, S *out,
                     float *lse) {
  extern __shared__ __align__(128) unsigned char shared[];
  const common::AttentionDims &g = a.g;
  unsigned char *sq = shared, *skv = shared + kStageBytes; // k0 v0 k1 v1
  int64_t b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kAttnTile;
  int64_t kvh = h / g.group;
  int64_t stat0 = (b * g.hq + h) * g.s;
  HeadRows qr = queryRows(g, b, h), kr = keyRows(g, b, kvh, g.d);
  int r0 = 16 * (threadIdx.x / 32); // the warp's first row
  loadCoreTileAsync<S>(q + qr.start, int(qr.ld), i0, g.s, sq);
  float o[kD / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {};
  int64_t jEnd = a.causal ? min(g.sk, i0 + kAttnTile) : g.sk;
  const S *kh = k + kr.start, *vh = v + kr.start;
  // The descriptors of Q and of buffer 0's K and V (buffer 1's: 2
  // kCoreTileBytes on).
  uint64_t descQ = kMajorTile(sq), descK0 = kMajorTile(skv),
           descV0 = mnMajorTile(skv + kCoreTileBytes);
  forCoreKeyTiles(
      kh, vh, int(kr.ld), g.sk, jEnd, skv, [&](int64_t j0, uint32_t at) {
        float s[kNt][4];
        wgmmaFence();
        issueABt<S>(s, descQ, wgmmaAdvance(descK0, at)); // S = Q K^T
        wgmmaCommit();
        wgmmaWait<0>();
        wgmmaFenceOperands(flat(s));
        float kf = scaleAndMask<S, false>(s, a, b, h, i0 + r0, j0,
                                          tileNeedsMask(a, i0, j0));
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
  // The output rows as the 64-row forward writes them (Q's buffer stages
  // them, row-major).
  S *staged = reinterpret_cast<S *>(sq);
  finishForwardRows<S, kD>(o, m, l, staged, r0, i0 + r0, g.s, lse, stat0);
  __syncthreads();
  HeadRows orow = outRows(g, b, h);
  storeRows<S, kD>(staged, out + orow.start, int(orow.ld), i0, g.s);
}

} // namespace

namespace detail {

Status attentionForwardWgmma(const char *op, const AttnArgs &a, DType t,
                             const Context &ctx, const TensorRef &q,
                             const TensorRef &k, const TensorRef &v,
                             const TensorRef &out, const TensorRef &lse) {
  const common::AttentionDims &g = a.g;
  // Its launches and errors name the path ("packed_attention on wgmma").
  std::string name = std::string(op) + " on wgmma";
  op = name.c_str();
  if (t == DType::BF16)
    return launchTiles(
        op, attnForwardWgmma<__nv_bfloat16>, kSharedBytes, g.s, kAttnTile, g.hq,
        kAttnThreads, g, ctx, a, q.as<__nv_bfloat16>(), k.as<__nv_bfloat16>(),
        v.as<__nv_bfloat16>(), out.as<__nv_bfloat16>(), lse.as<float>());
  return launchTiles(op, attnForwardWgmma<__half>, kSharedBytes, g.s, kAttnTile,
                     g.hq, kAttnThreads, g, ctx, a, q.as<__half>(),
                     k.as<__half>(), v.as<__half>(), out.as<__half>(),
                     lse.as<float>());
}

} // namespace detail
} // namespace smp::kernels::cuda
