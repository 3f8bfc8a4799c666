//===- AttentionTiles.cuh - Tiles of the tensor-core attention -*- C++ -*-===//
//
// The tile machinery of AttentionMma.cu's kernels: 64-row tiles of D
// f16/bf16 elements in shared memory (row stride D + 8 elements, so that
// ldmatrix's eight rows fall in distinct banks), copied in by cp.async
// with every thread's 16-byte vectors a count known when compiling
// (forTileVectors), walked double-buffered (pipelined: the next tile's
// copies in flight while one is computed), and the warp-level products
// that read them (productABt: S = A B^T over D; accumulatePX: O += P X
// with P's C fragments as the A operand), four warps of 16 rows a block
// (or 32: kM row tiles a warp), over 64 columns (or a slice of them: kN
// n-tiles).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_ATTENTIONTILES_CUH
#define SMP_KERNELS_CUDA_ATTENTIONTILES_CUH

#include "Mma.cuh"

namespace smp::kernels::cuda::detail {

constexpr int kAttnTile = 64;      // queries and keys per tile
constexpr int kAttnThreads = 128;  // 4 warps of 16 rows
constexpr int kAttnPad = 8;        // elements after each shared-memory row
constexpr int kNt = kAttnTile / 8; // n-tiles of a 64-column score tile

template <int D> constexpr int64_t kLd = D + kAttnPad;
/// The elements of a 64-row shared tile, and its bytes.
template <int D> constexpr int64_t kTileElems = kAttnTile *kLd<D>;
template <int D> constexpr size_t tileBytes() {
  return sizeof(uint16_t) * kTileElems<D>;
}

/// f(r, c) for each 16-byte vector (row r, first column c) of a tile of
/// kRows rows of D elements that the calling thread (of the block's
/// kThreads) copies: kRows D / 8 / kThreads of them, a count known when
/// compiling, so the loop unrolls (a loop to a bound the compiler cannot
/// see had become a generic loop of remainders and branches, some 20
/// instructions a vector).
template <int D, int kRows, class F, int kThreads = kAttnThreads>
__device__ inline void forTileVectors(F f) {
  constexpr int kVec = D / 8; // 16-byte vectors a row
  static_assert(kRows * kVec % kThreads == 0, "whole vectors a thread");
  int tid = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int n = 0; n < kRows * kVec / kThreads; ++n) {
    if constexpr (kThreads % kVec == 0) // the same column every time
      f(tid / kVec + n * (kThreads / kVec), tid % kVec * 8);
    else
      f((tid + n * kThreads) / kVec, (tid + n * kThreads) % kVec * 8);
  }
}

/// The rows of a kRows-row tile from row r0 that exist (of `rows`), 0 to
/// kRows.
template <int kRows> __device__ inline int rowsLeft(int64_t r0, int64_t rows) {
  return static_cast<int>(max(int64_t(0), min(rows - r0, int64_t(kRows))));
}

/// Rows [r0, r0 + kRows) of `rows` rows of D elements (ld apart from src;
/// 32-bit offsets within the tile, checked on the host) into a shared tile
/// by cp.async (in the thread's open group); rows past `rows` are zeroed
/// now. A whole tile (every tile but a sequence's last) takes a loop of its
/// own without a test a vector, whose addresses are the first vector's plus
/// constants.
template <class S, int D, int kRows = kAttnTile>
__device__ void loadRowsAsync(const S *src, int ld, int64_t r0, int64_t rows,
                              S *tile) {
  const S *at = src + r0 * ld;
  int left = rowsLeft<kRows>(r0, rows);
  if (left == kRows) {
    forTileVectors<D, kRows>([&](int r, int c) {
      cpAsync<16>(tile + r * kLd<D> + c, at + r * ld + c);
    });
    return;
  }
  forTileVectors<D, kRows>([&](int r, int c) {
    S *to = tile + r * kLd<D> + c;
    if (r < left)
      cpAsync<16>(to, at + r * ld + c);
    else
      zero16(to);
  });
}

/// Nothing between a tile's copies and the barrier after them.
struct NoFence {
  __device__ void operator()() const {}
};

/// The double-buffered loop over `tiles` tiles: issue(it, buf) starts the
/// copies of tile it into buffer buf (cp.async, or plain stores), and
/// body(it, buf) runs once tile it is in buffer buf for every thread, while
/// tile it + 1's copies are in flight. Copies the caller started before the
/// loop complete with tile 0's; all are done (and every thread past the
/// last body) when it returns. fence() runs in each thread once its copies
/// of a tile are done, before the barrier that gives the tile to every
/// thread (AttentionWgmma.cu: the proxy fence the tensor cores' reads of
/// shared memory need).
template <class Issue, class Body, class Fence = NoFence>
__device__ void pipelined(int tiles, Issue issue, Body body, Fence fence = {}) {
  if (tiles > 0)
    issue(0, 0);
  cpAsyncCommit();
  for (int it = 0; it < tiles; ++it) {
    __syncthreads(); // the readers of the buffer refilled next are done
    if (it + 1 < tiles) {
      issue(it + 1, (it + 1) % 2);
      cpAsyncCommit();
      cpAsyncWait<1>();
    } else {
      cpAsyncWait<0>();
    }
    fence();
    __syncthreads(); // tile it is every thread's
    body(it, it % 2);
  }
  cpAsyncWait<0>();
  __syncthreads();
}

/// The number of 64-row tiles from row r0 to row n (0 when r0 >= n).
__device__ inline int tilesFrom(int64_t r0, int64_t n) {
  return n > r0 ? static_cast<int>((n - r0 + kAttnTile - 1) / kAttnTile) : 0;
}

/// The key pass's place among the query tiles of its group's heads: head h,
/// first query i0.
struct QueryTileWalk {
  int64_t h, i0;
  /// The next tile: the next 64 queries, or the next head's first tile
  /// (iStart) after the last of s.
  __device__ void advance(int64_t iStart, int64_t s) {
    i0 += kAttnTile;
    if (i0 >= s) {
      i0 = iStart;
      ++h;
    }
  }
};

/// pipelined over the key tiles [0, jEnd) of one key/value head (k and v
/// at its first row, sk rows ld apart): body(j0, kTile, vTile) with the
/// tile's K and V in shared memory (two buffers of both at skv).
template <class S, int D, class Body>
__device__ void forKeyTiles(const S *k, const S *v, int ld, int64_t sk,
                            int64_t jEnd, S *skv, Body body) {
  constexpr int64_t kT = kTileElems<D>;
  pipelined(
      tilesFrom(0, jEnd),
      [&](int it, int buf) {
        int64_t j0 = int64_t(it) * kAttnTile;
        loadRowsAsync<S, D>(k, ld, j0, sk, skv + 2 * buf * kT);
        loadRowsAsync<S, D>(v, ld, j0, sk, skv + (2 * buf + 1) * kT);
      },
      [&](int it, int buf) {
        body(int64_t(it) * kAttnTile, skv + 2 * buf * kT,
             skv + (2 * buf + 1) * kT);
      });
}

/// A shared tile into rows [r0, min(r0 + kRows, rows)) of `rows` rows of
/// D elements, ld apart from dst, by the block's kThreads threads.
template <class S, int D, int kRows = kAttnTile, int kThreads = kAttnThreads>
__device__ void storeRows(const S *tile, S *dst, int ld, int64_t r0,
                          int64_t rows) {
  S *at = dst + r0 * ld;
  int left = rowsLeft<kRows>(r0, rows);
  auto store = [&](int r, int c) {
    if (r < left)
      copy16(at + r * ld + c, tile + r * kLd<D> + c);
  };
  forTileVectors<D, kRows, decltype(store), kThreads>(store);
}

/// The warp's C fragments (16 rows from r0, D columns) times `scale`,
/// rounded into a shared tile.
template <class S, int D>
__device__ void fragmentsToTile(const float (&c)[D / 8][4], float scale,
                                S *tile, int r0) {
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int nt = 0; nt < D / 8; ++nt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      S *p = tile + (r0 + g + 8 * half) * kLd<D> + nt * 8 + 2 * t;
      p[0] = FT<S>::store(scale * c[nt][2 * half]);
      p[1] = FT<S>::store(scale * c[nt][2 * half + 1]);
    }
}

/// acc[m][nt] and acc[m][nt + 1] += fa[m] times the two n-tiles' B
/// fragments fb (loadBt2 / loadB2), for each of the kM row tiles.
template <class S, int kM, int kN>
__device__ inline void mmaPairs(float (&acc)[kM][kN][4], int nt,
                                const uint32_t (&fa)[kM][4],
                                const uint32_t (&fb)[4]) {
#pragma unroll
  for (int m = 0; m < kM; ++m) {
    mma16816<S>(acc[m][nt], fa[m], fb[0], fb[1]);
    mma16816<S>(acc[m][nt + 1], fa[m], fb[2], fb[3]);
  }
}

/// acc[m] = A B^T for the warp's kM row tiles [r0 + 16 m, r0 + 16 m + 16)
/// of tile a and the first 8 kN rows of tile b (64 by default), over D:
/// kM 16 x 8 kN score tiles (each B fragment loaded once for all of them).
template <class S, int D, int kM, int kN = kNt>
__device__ void productABt(float (&acc)[kM][kN][4], const S *a, int r0,
                           const S *b) {
  static_assert(kN % 2 == 0, "n-tiles in pairs");
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int nt = 0; nt < kN; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        acc[m][nt][i] = 0.0f;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    uint32_t fa[kM][4];
#pragma unroll
    for (int m = 0; m < kM; ++m)
      loadA(fa[m], a, kLd<D>, r0 + 16 * m, kk * 16);
#pragma unroll
    for (int nt = 0; nt < kN; nt += 2) {
      uint32_t fb[4];
      loadBt2(fb, b, kLd<D>, nt * 8, kk * 16);
      mmaPairs<S, kM>(acc, nt, fa, fb);
    }
  }
}

/// acc[m] += P[m] X for the warp's kM 16 x 8 kN tiles p (C fragments,
/// rounded to S; 64 columns by default) and the first 8 kN rows of the
/// D-column tile x.
template <class S, int D, int kM, int kN = kNt>
__device__ void accumulatePX(float (&acc)[kM][D / 8][4],
                             const float (&p)[kM][kN][4], const S *x) {
  static_assert(kN % 2 == 0, "k-steps of 16 columns");
#pragma unroll
  for (int kk = 0; kk < kN / 2; ++kk) {
    uint32_t fa[kM][4];
#pragma unroll
    for (int m = 0; m < kM; ++m)
      packA<S>(fa[m], p[m][2 * kk], p[m][2 * kk + 1]);
#pragma unroll
    for (int nt = 0; nt < D / 8; nt += 2) {
      uint32_t fb[4];
      loadB2(fb, x, kLd<D>, kk * 16, nt * 8);
      mmaPairs<S, kM>(acc, nt, fa, fb);
    }
  }
}

} // namespace smp::kernels::cuda::detail

#endif // SMP_KERNELS_CUDA_ATTENTIONTILES_CUH
