//===- ColumnSums.cuh - Sums over the rows of a matrix's columns ----------===//
//
// The column sums of the gradient kernels that make a parameter's gradient
// from a [rows, n] matrix: the norms' scale and bias (Norm.cu) and a
// linear layer's bias under its GELU's gradient (Training.cu). A block of
// kColsX x kColsY threads takes kColsX columns (or 16-byte vectors of
// columns) of a chunk of rows, thread row ty the rows ty, ty + kColsY, ...;
// the block adds its thread rows' sums in order. When the columns alone make
// few blocks the rows are split into chunks (ReduceChunks), each block's
// sums written to a scratch, and columnSumsFinish adds the chunks in order:
// the sums' grouping depends on the shapes only, never on timing.
//
// Up to two sums a column (the norms' scale and bias); with one (`db` null)
// only the first is stored and read.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_COLUMNSUMS_CUH
#define SMP_KERNELS_CUDA_COLUMNSUMS_CUH

#include "Common.cuh"

#include <algorithm>

namespace smp::kernels::cuda::detail {

/// The column kernels' blocks: kColsX columns (or 16-byte vectors of
/// columns) x kColsY row slices.
constexpr int kColsX = 32, kColsY = 8;

/// Column j's sums (s for ds, b for db) over row chunk c: into `part`
/// (chunks of them, for columnSumsFinish; db's after ds's when db is
/// stored) or, with no part, into ds and db.
template <class A>
__device__ inline void storeColumnSums(A *part, int64_t c, int64_t chunks,
                                       int64_t n, int64_t j, A s, A b, Out ds,
                                       Out db) {
  if (part) {
    part[c * n + j] = s;
    if (db.p)
      part[(chunks + c) * n + j] = b;
    return;
  }
  ds.store(j, static_cast<double>(A(0) + s));
  if (db.p)
    db.store(j, static_cast<double>(A(0) + b));
}

/// A column block's sums over its Y thread rows (kColsY, or the finish's
/// rows): thread (tx, ty) holds its rows' sums s and b of column j; row 0
/// adds the other rows' in order and stores them (storeColumnSums). Every
/// thread of the block calls it.
template <class A, int Y>
__device__ void columnRowsSum(A (&ps)[Y][kColsX], A (&pb)[Y][kColsX], int64_t j,
                              int64_t n, A s, A b, A *part, int64_t c,
                              int64_t chunks, Out ds, Out db) {
  int tx = threadIdx.x, ty = threadIdx.y;
  ps[ty][tx] = s;
  pb[ty][tx] = b;
  __syncthreads();
  if (ty == 0 && j < n) {
    for (int k = 1; k < Y; ++k) {
      s += ps[k][tx];
      b += pb[k][tx];
    }
    storeColumnSums(part, c, chunks, n, j, s, b, ds, db);
  }
  __syncthreads();
}

/// The column blocks (of kColsX 16-byte vectors) across n values of S.
template <class S> int64_t vecColumnTiles(int64_t n) {
  return (n / Pack<S>::N + kColsX - 1) / kColsX;
}

/// A column kernel's walk over 16-byte vectors of S (n a multiple of
/// Pack<S>::N, kColsX x kColsY threads): block (x, c) takes the tiles of
/// kColsX vectors x, x + gridDim.x, ... over rows [c chunkRows, (c + 1)
/// chunkRows); thread (tx, ty) calls row(r, v, s, b) for vector v of its
/// rows to add into its sums s and b (Pack<S>::N columns each, from A(0)),
/// then the block adds its thread rows' sums in order and stores them.
template <class S, class A, class Row>
__device__ void vecColumnSums(int64_t rows, int64_t n, int64_t chunkRows,
                              Out ds, Out db, A *part, Row &&row) {
  constexpr int N = Pack<S>::N, kW = kColsX * N; // a block's columns
  __shared__ A ps[kColsY][kW], pb[kColsY][kW];
  int tx = threadIdx.x, ty = threadIdx.y;
  int64_t nv = n / N, c = blockIdx.y, r1 = min(rows, (c + 1) * chunkRows);
  for (int64_t v0 = static_cast<int64_t>(blockIdx.x) * kColsX; v0 < nv;
       v0 += static_cast<int64_t>(gridDim.x) * kColsX) {
    int64_t v = v0 + tx;
    A s[N], b[N];
#pragma unroll
    for (int k = 0; k < N; ++k)
      s[k] = b[k] = A(0);
    if (v < nv)
      for (int64_t r = c * chunkRows + ty; r < r1; r += kColsY)
        row(r, v, s, b);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      ps[ty][tx * N + k] = s[k];
      pb[ty][tx * N + k] = b[k];
    }
    __syncthreads();
    for (int e = ty * kColsX + tx; e < kW; e += kColsX * kColsY) {
      int64_t j = v0 * N + e;
      if (j >= n)
        continue;
      A ss = ps[0][e], bb = pb[0][e];
      for (int k = 1; k < kColsY; ++k) {
        ss += ps[k][e];
        bb += pb[k][e];
      }
      storeColumnSums(part, c, int64_t(gridDim.y), n, j, ss, bb, ds, db);
    }
    __syncthreads();
  }
}

/// The chunks' sums of each column combined: a block of kColsX x Y threads
/// takes kColsX columns, thread row ty the chunks ty, ty + Y, ..., then the
/// rows' sums in order (a thread per column had summed all its chunks
/// alone: 256 dependent loads from 24 blocks). Y = kColsY after the column
/// kernels; Norm.cu's kFinishRows after normGradRowsSums, whose few
/// columns (24 blocks for GPT-2's 768) read 256 chunks each.
template <class A, int Y = kColsY>
__global__ void __launch_bounds__(kColsX *Y)
    columnSumsFinish(const A *part, int64_t chunks, int64_t n, Out ds, Out db) {
  __shared__ A ps[Y][kColsX], pb[Y][kColsX];
  int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t j0 = static_cast<int64_t>(blockIdx.x) * kColsX; j0 < n;
       j0 += static_cast<int64_t>(gridDim.x) * kColsX) {
    int64_t j = j0 + tx;
    A s = A(0), b = A(0);
    if (j < n)
      for (int64_t c = ty; c < chunks; c += Y) {
        s += part[c * n + j];
        if (db.p)
          b += part[(chunks + c) * n + j];
      }
    columnRowsSum<A, Y>(ps, pb, j, n, s, b, nullptr, 0, chunks, ds, db);
  }
}

/// The chunk sums' scratch: one or two (db) A values a column and chunk.
template <class A>
Status allocateChunkSums(const char *op, const Context *ctx, int64_t chunks,
                         int64_t n, Out db, Scratch &part) {
  size_t sums = db.p ? 2 : 1;
  return part.allocate(op, sizeof(A) * sums * static_cast<size_t>(chunks * n),
                       ctx->stream);
}

/// columnSumsFinish<A, Y> over `chunks` chunk sums of n columns.
template <class A, int Y = kColsY>
Status finishColumnSums(const char *op, const Context *ctx, const A *part,
                        int64_t chunks, int64_t n, Out ds, Out db) {
  int64_t tiles = (n + kColsX - 1) / kColsX;
  columnSumsFinish<A, Y>
      <<<static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, 1 << 20)),
         dim3(kColsX, Y), 0, ctx->stream>>>(part, chunks, n, ds, db);
  return launchStatus(op);
}

/// A column kernel over the rows, `tiles` blocks wide, in chunks of at
/// least minRows rows (ReduceChunks) when the columns alone make few blocks:
/// launch(grid, chunkRows, part) enqueues it, part null without chunks;
/// columnSumsFinish then sums the chunks.
template <class A, class Launch>
Status columnSums(const char *op, const Context *ctx, int64_t tiles,
                  int64_t rows, int64_t n, int64_t minRows, Out ds, Out db,
                  Launch &&launch) {
  ReduceChunks split(tiles, rows, minRows);
  dim3 grid(static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, 1 << 20)),
            static_cast<unsigned>(split.chunks));
  Scratch part;
  if (split.chunks > 1)
    SMP_RETURN_IF_ERROR(
        allocateChunkSums<A>(op, ctx, split.chunks, n, db, part));
  launch(grid, split.rows, part.as<A>());
  SMP_RETURN_IF_ERROR(launchStatus(op));
  if (split.chunks == 1)
    return Status::success();
  return finishColumnSums<A>(op, ctx, part.as<const A>(), split.chunks, n, ds,
                             db);
}

} // namespace smp::kernels::cuda::detail

#endif // SMP_KERNELS_CUDA_COLUMNSUMS_CUH
