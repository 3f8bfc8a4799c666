//===- AttentionWgmma.cuh - Tiles of the attention on wgmma -----*- C++ -*-===//
//
// What AttentionWgmma.cu's forward and AttentionWgmmaGrad.cu's backward
// share: 64 x 64 tiles of f16/bf16 (D = 64) in shared memory as Wgmma.cuh's
// unswizzled core matrices, in one order ("row groups": element (r, c) at
// (r / 8) 1,024 + (c / 8) 128 + (r % 8) 16 + (c % 8) 2 bytes, each 8 x 8
// core matrix 128 contiguous bytes), copied in by cp.async, and the two
// ways a product reads such a tile: K-major (the tile's rows are A's rows
// or B's columns, its columns K: Q K^T, K Q^T, dO V^T) or MN-major (its
// rows are K, its columns B's N: P V, P^T dO, dS^T Q, dS K). Private to
// kernels/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_ATTENTIONWGMMA_CUH
#define SMP_KERNELS_CUDA_ATTENTIONWGMMA_CUH

#include "AttentionTiles.cuh"
#include "Wgmma.cuh"

namespace smp::kernels::cuda::detail {

constexpr int kWgD = 64;                            // head dim
constexpr uint32_t kCoreBytes = 128;                // a core matrix: 8 x 16 B
constexpr uint32_t kRowGroupBytes = 8 * kCoreBytes; // 8 rows of the tile
constexpr uint32_t kCoreTileBytes = 64 * kWgD * 2;  // a 64 x 64 tile
/// A buffer that also stages 64 output rows (kLd<kWgD> apart) at the end.
constexpr size_t kStageBytes = tileBytes<kWgD>();
static_assert(kStageBytes >= kCoreTileBytes && kStageBytes % 128 == 0,
              "a staging buffer holds a core-matrix tile");

/// Rows [r0, r0 + 64) of `rows` rows of 64 elements (ld apart from src)
/// into a tile in row groups by cp.async, by the block's kThreads threads
/// (one warpgroup or two); rows past `rows` zeroed now (a row of garbage
/// would put NaN into the products through the zeros that multiply it).
/// Thread t copies the tile's 16-byte vectors t, t + kThreads, ... in the
/// tile's own order, so a warp's 32 stores fill 512 contiguous bytes (taken
/// row by row, a row's eight vectors would land 128 bytes apart, in the
/// same four banks), and a warp reads 8 rows' 64 contiguous bytes. A whole
/// tile (every tile but a sequence's last) takes no test a vector.
template <class S, int kThreads = kAttnThreads>
__device__ void loadCoreTileAsync(const S *src, int ld, int64_t r0,
                                  int64_t rows, unsigned char *tile) {
  constexpr int kVectors = kAttnTile * kWgD / 8;
  constexpr int kEach = kVectors / kThreads; // a thread's vectors
  constexpr int kStep = kThreads / 8;        // rows from one to the next
  static_assert(kVectors % kThreads == 0 && kThreads % 64 == 0,
                "whole row groups a pass");
  int n = static_cast<int>(threadIdx.x); // the first vector, at byte 16 n
  // Vector n + kThreads i: row r + kStep i, the same columns.
  int r = n % 8 + n / 64 * 8, c = n / 8 % 8 * 8;
  const S *at = src + r0 * ld + r * ld + c;
  unsigned char *to = tile + 16 * n;
  int left = rowsLeft<kAttnTile>(r0, rows);
  if (left == kAttnTile) { // a whole tile: no test a vector
#pragma unroll
    for (int i = 0; i < kEach; ++i)
      cpAsync<16>(to + 16 * kThreads * i, at + kStep * i * ld);
    return;
  }
#pragma unroll
  for (int i = 0; i < kEach; ++i) {
    if (r + kStep * i < left)
      cpAsync<16>(to + 16 * kThreads * i, at + kStep * i * ld);
    else
      zero16(to + 16 * kThreads * i);
  }
}

/// pipelined over the key tiles [0, jEnd) of one key/value head (k and v
/// at its first row, sk rows ld apart; the block's kThreads threads copy),
/// each tile's K and V copied into
/// one of two buffers of (K, V) tiles at skv and fenced for the tensor
/// cores (their reads are the async proxy's, the copies and the tails'
/// zeros the generic proxy's): body(j0, at), at the bytes from buffer 0's
/// K to the tile's.
template <class S, int kThreads, class Body>
__device__ void forCoreKeyTiles(const S *k, const S *v, int ld, int64_t sk,
                                int64_t jEnd, unsigned char *skv, Body body) {
  pipelined(
      tilesFrom(0, jEnd),
      [&](int it, int buf) {
        int64_t j0 = int64_t(it) * kAttnTile;
        unsigned char *kt = skv + 2 * buf * kCoreTileBytes;
        loadCoreTileAsync<S, kThreads>(k, ld, j0, sk, kt);
        loadCoreTileAsync<S, kThreads>(v, ld, j0, sk, kt + kCoreTileBytes);
      },
      [&](int it, int buf) {
        body(int64_t(it) * kAttnTile, uint32_t(2 * buf * kCoreTileBytes));
      },
      [] { fenceProxyAsync(); });
}

/// The calling thread's warpgroup in a block of kWg, as a value the
/// compiler knows to be the same across the warp (a shuffle from lane 0,
/// as CUTLASS's canonical_warp_group_idx): the descriptors made from it
/// then live in uniform registers, where threadIdx.x / 128 had them made
/// in each thread's and moved over before every product.
template <int kWg> __device__ inline int warpgroupIndex() {
  if constexpr (kWg == 1)
    return 0;
  else
    return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}

/// The descriptor of a tile read K-major (its columns K, its 64 rows A's
/// rows or B's columns), at its first k-step.
__device__ inline uint64_t kMajorTile(const unsigned char *tile) {
  return wgmmaKMajor(tile, kCoreBytes, kRowGroupBytes);
}

/// The descriptor of a tile read as an MN-major B (its rows K, its 64
/// columns N), at its first k-step.
__device__ inline uint64_t mnMajorTile(const unsigned char *tile) {
  return wgmmaMnMajor(tile, kRowGroupBytes, kCoreBytes);
}

/// K-step kk (16 of K) of a tile read K-major: its columns [16 kk, 16 kk +
/// 16).
__device__ inline uint64_t kMajorStep(uint64_t tile, int kk) {
  return wgmmaAdvance(tile, 2 * kk * kCoreBytes);
}

/// K-step kk of a tile read MN-major: its rows [16 kk, 16 kk + 16).
__device__ inline uint64_t mnMajorStep(uint64_t tile, int kk) {
  return wgmmaAdvance(tile, 2 * kk * kRowGroupBytes);
}

/// A warp's [8][4] C fragments as the 32 accumulators a thread passes to
/// wgmma (the same registers, in the same order).
__device__ inline float (&flat(float (&f)[kNt][4]))[32] {
  return *reinterpret_cast<float(*)[32]>(&f);
}

/// The four k-steps' A fragments of a warp's 16 x 64 C fragments f,
/// rounded to S (a product's A from registers, K the 64 columns).
template <class S>
__device__ inline void packRows(uint32_t (&p)[kAttnTile / 16][4],
                                const float (&f)[kNt][4]) {
#pragma unroll
  for (int kk = 0; kk < kAttnTile / 16; ++kk)
    packA<S>(p[kk], f[2 * kk], f[2 * kk + 1]);
}

/// d = A B^T over D = 64 for the warpgroup, tiles a and b read K-major
/// (their kMajorTile descriptors): four products, not committed.
template <class S>
__device__ inline void issueABt(float (&d)[kNt][4], uint64_t a, uint64_t b) {
#pragma unroll
  for (int kk = 0; kk < kWgD / 16; ++kk)
    wgmmaM64N64K16<S>(flat(d), kMajorStep(a, kk), kMajorStep(b, kk), kk > 0);
}

/// acc += P X for the warpgroup, P's fragments in registers (unchanged
/// until the products are waited for) and tile x read MN-major (its
/// mnMajorTile descriptor): four products, not committed.
template <class S>
__device__ inline void issuePX(float (&acc)[kNt][4],
                               const uint32_t (&p)[kAttnTile / 16][4],
                               uint64_t x) {
#pragma unroll
  for (int kk = 0; kk < kAttnTile / 16; ++kk)
    wgmmaM64N64K16<S, true>(flat(acc), p[kk], mnMajorStep(x, kk), true);
}

} // namespace smp::kernels::cuda::detail

#endif // SMP_KERNELS_CUDA_ATTENTIONWGMMA_CUH
