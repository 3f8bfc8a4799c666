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
// registers and V's tile MN-major. Each product group is waited for before
// its accumulators are read (the softmax between them needs S; the next
// tile's rescaling needs O); the tiles' copies are fenced for the tensor
// cores' (async) proxy before the barrier that hands them over. The
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
#include "AttentionTiles.cuh"
#include "Wgmma.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

constexpr int kD = 64;                           // head dim
constexpr uint32_t kCoreBytes = 128;             // a core matrix: 8 x 16 bytes
constexpr uint32_t kGroupBytes = 8 * 128;        // 8 core matrices
constexpr uint32_t kCoreTileBytes = 64 * kD * 2; // a 64 x 64 tile
/// Q's buffer also stages the output rows (kLd<kD> apart) at the end.
constexpr size_t kQBytes = tileBytes<kD>();
constexpr size_t kSharedBytes = kQBytes + 4 * kCoreTileBytes;
static_assert(kQBytes >= kCoreTileBytes && kQBytes % 128 == 0, "Q's buffer");

/// Rows [r0, r0 + 64) of `rows` rows of 64 elements (ld apart from src)
/// into a 64 x 64 core-matrix tile by cp.async, K-major (Q, K: a row's
/// core matrices adjacent, LBO 128 bytes, SBO 1,024) or, kMnMajor, as B =
/// V is read along N (V's row r is K index r: LBO 128 between groups of 8
/// rows, SBO 1,024 between groups of 8 columns); rows past `rows` zeroed
/// now (a V row of garbage would put NaN into O through P's zeros). Thread
/// t copies the tile's 16-byte vectors t, t + 128, ... in the tile's own
/// order, so a warp's 32 stores fill 512 contiguous bytes (taken row by
/// row, the eight vectors of a row would land 128 bytes apart, in the same
/// four banks); a warp reads 8 rows' 64 bytes (K-major) or 32 rows' 16
/// bytes (MN-major) of the global rows.
template <class S, bool kMnMajor>
__device__ void loadCoreTileAsync(const S *src, int ld, int64_t r0,
                                  int64_t rows, unsigned char *tile) {
  const S *at = src + r0 * ld;
  int left = rowsLeft<kAttnTile>(r0, rows);
  constexpr int kVectors = kAttnTile * kD / 8;
#pragma unroll
  for (int i = 0; i < kVectors / kAttnThreads; ++i) {
    int n = static_cast<int>(threadIdx.x) + i * kAttnThreads; // at 16 n
    int r = kMnMajor ? n % 64 : n % 8 + n / 64 * 8;
    int c = kMnMajor ? n / 64 * 8 : n / 8 % 8 * 8;
    unsigned char *to = tile + 16 * n;
    if (r < left)
      cpAsync<16>(to, at + r * ld + c);
    else
      zero16(to);
  }
}

/// The descriptor of k-step kk (16 columns of K-major Q or K, 16 rows of
/// MN-major V) of a core-matrix tile.
__device__ inline uint64_t stepDescriptor(const unsigned char *tile, int kk) {
  return wgmmaDescriptor(tile + 2 * kk * kCoreBytes, kCoreBytes, kGroupBytes);
}

/// A warp's [16][8][4] fragments as the 32 accumulators a thread passes to
/// wgmma (the same registers, in the same order).
__device__ inline float (&flat(float (&f)[kNt][4]))[32] {
  return *reinterpret_cast<float(*)[32]>(&f);
}

template <class S>
__global__ void __launch_bounds__(kAttnThreads, 4)
    attnForwardWgmma(AttnArgs a, const S *q, const S *k, const S *v, S *out,
                     float *lse) {
  extern __shared__ __align__(128) unsigned char shared[];
  const common::AttentionDims &g = a.g;
  unsigned char *sq = shared, *skv = shared + kQBytes; // k0 v0 k1 v1
  int64_t b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kAttnTile;
  int64_t kvh = h / g.group;
  int64_t stat0 = (b * g.hq + h) * g.s;
  HeadRows qr = queryRows(g, b, h), kr = keyRows(g, b, kvh, g.d);
  int r0 = 16 * (threadIdx.x / 32); // the warp's first row
  loadCoreTileAsync<S, false>(q + qr.start, int(qr.ld), i0, g.s, sq);
  float o[kD / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {};
  int64_t jEnd = a.causal ? min(g.sk, i0 + kAttnTile) : g.sk;
  const S *kh = k + kr.start, *vh = v + kr.start;
  pipelined(
      tilesFrom(0, jEnd),
      [&](int it, int buf) {
        int64_t j0 = int64_t(it) * kAttnTile;
        unsigned char *kt = skv + 2 * buf * kCoreTileBytes;
        loadCoreTileAsync<S, false>(kh, int(kr.ld), j0, g.sk, kt);
        loadCoreTileAsync<S, true>(vh, int(kr.ld), j0, g.sk,
                                   kt + kCoreTileBytes);
      },
      [&](int it, int buf) {
        int64_t j0 = int64_t(it) * kAttnTile;
        const unsigned char *kt = skv + 2 * buf * kCoreTileBytes,
                            *vt = kt + kCoreTileBytes;
        float s[kNt][4];
        wgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kD / 16; ++kk)
          wgmmaM64N64K16<S>(flat(s), stepDescriptor(sq, kk),
                            stepDescriptor(kt, kk), kk > 0);
        wgmmaCommit();
        wgmmaWait<0>();
        wgmmaFenceOperands(flat(s));
        float kf = scaleAndMask<S, false>(s, a, b, h, i0 + r0, j0,
                                          tileNeedsMask(a, i0, j0));
        onlineSoftmax<kD>(s, kf, m, l, o);
        uint32_t p[kAttnTile / 16][4];
#pragma unroll
        for (int kk = 0; kk < kAttnTile / 16; ++kk)
          packA<S>(p[kk], s[2 * kk], s[2 * kk + 1]);
        wgmmaFence();
#pragma unroll
        for (int kk = 0; kk < kAttnTile / 16; ++kk)
          wgmmaM64N64K16<S, true>(flat(o), p[kk], stepDescriptor(vt, kk), true);
        wgmmaCommit();
        wgmmaWait<0>();
        wgmmaFenceOperands(flat(o));
        wgmmaKeepOperands(p);
      },
      // The copies' (and the tails' zeros') writes are the generic proxy's;
      // the tensor cores read through the async proxy.
      [] { fenceProxyAsync(); });
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
