//===- NormWarp.cuh - Norm kernels on 16-byte vectors, a warp per row -----===//
//
// The layer / RMS norm kernels Norm.cu takes where the rows allow it (one
// dtype, whole aligned 16-byte vectors: a transformer's hidden states): the
// forward and dx with a warp per row (the parameters staged in shared
// memory, the statistics warp shuffles), and the parameters' gradients
// summed over 16-byte vectors of columns. f16/bf16 rows of 256 to 1,024
// values are held in registers, a lane's vectors read once: the forward
// (normRowsHeld) and dx with the parameters' sums in the same pass
// (normGradRowsSums). The same arithmetic per element as Norm.cu's
// block-per-row kernels, the sums in other groupings. On an
// H200 (GPT-2 124M, [16,384 x 768] bf16) the block-per-row kernels had
// taken 86 us a forward and 0.49 ms a gradient, their threads three 2-byte
// loads each between block-wide barriers (docs/benchmarks.md).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_NORMWARP_CUH
#define SMP_KERNELS_CUDA_NORMWARP_CUH

#include "ColumnSums.cuh"
#include "Common.cuh"

namespace smp::kernels::cuda::detail {

/// Row r's statistics over one warp (all 32 lanes call it): the mean (0
/// for Rms) and 1 / sqrt(var + eps) (Rms: of the mean square) of the nv
/// 16-byte vectors at xr, in C, the variance in two passes as normRows'.
template <class S, bool Rms, class C>
__device__ void warpRowStats(const Pack<S> *xr, int64_t nv, int64_t d,
                             float eps, C &mean, C &rstd) {
  int lane = threadIdx.x & 31;
  mean = C(0);
  if (!Rms) {
    C sum = C(0);
    for (int64_t v = lane; v < nv; v += 32) {
      Pack<S> p = xr[v];
#pragma unroll
      for (int k = 0; k < Pack<S>::N; ++k)
        sum += FT<S>::load(p.v[k]);
    }
    mean = warpAllSum(sum) / static_cast<C>(d);
  }
  C sq = C(0);
  for (int64_t v = lane; v < nv; v += 32) {
    Pack<S> p = xr[v];
#pragma unroll
    for (int k = 0; k < Pack<S>::N; ++k) {
      C c = FT<S>::load(p.v[k]) - mean;
      sq += c * c;
    }
  }
  sq = warpAllSum(sq);
  rstd = C(1) / dSqrt(sq / static_cast<C>(d) + static_cast<C>(eps));
}

/// Copies the d values of p (absent: zeros) into dst as C and waits for the
/// block: the parameters a block's rows all read, read once per block.
template <class C> __device__ void stageParam(In p, C *dst, int64_t d) {
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
    dst[j] = p.p ? static_cast<C>(p.load(j)) : C(0);
  __syncthreads();
}

/// normRows with a warp per row and 16-byte accesses (d a multiple of
/// Pack<S>::N, x and y 16-byte aligned; scale and bias staged in dynamic
/// shared memory, 2 d C values): the same arithmetic, in the same order
/// per element. A block per row made [16,384 x 768] bf16 rows 86 us on an
/// H200, each thread three 2-byte loads between block-wide barriers.
template <class S, bool Rms>
__global__ void normRowsWarp(const S *x, S *y, int64_t rows, int64_t d,
                             In scale, In bias, float eps) {
  using C = typename FT<S>::C;
  using P = Pack<S>;
  extern __shared__ float4 normShared[];
  C *sc = reinterpret_cast<C *>(normShared), *bi = sc + d;
  stageParam(scale, sc, d);
  stageParam(bias, bi, d);
  int64_t nv = d / P::N, perBlock = blockDim.x >> 5;
  int lane = threadIdx.x & 31;
  for (int64_t r = blockIdx.x * perBlock + (threadIdx.x >> 5); r < rows;
       r += gridDim.x * perBlock) {
    const P *xr = reinterpret_cast<const P *>(x + r * d);
    P *yr = reinterpret_cast<P *>(y + r * d);
    C mean, rstd;
    warpRowStats<S, Rms>(xr, nv, d, eps, mean, rstd);
    for (int64_t v = lane; v < nv; v += 32) {
      P p = xr[v], o;
#pragma unroll
      for (int k = 0; k < P::N; ++k) {
        int64_t j = v * P::N + k;
        C val = (FT<S>::load(p.v[k]) - mean) * rstd * sc[j];
        if (bias.p)
          val += bi[j];
        o.v[k] = FT<S>::store(val);
      }
      yr[v] = o;
    }
  }
}

/// Rows a block of normRowsWarp or normGradRowsWarp takes (a warp each).
constexpr int kWarpRowsThreads = 256;

/// Blocks for `rows` rows a warp each.
inline unsigned warpRowBlocks(int64_t rows) {
  return blocksFor((rows + kWarpRowsThreads / 32 - 1) /
                   (kWarpRowsThreads / 32));
}

/// Whether the warp-per-row kernels take rows of d S values: whole vectors,
/// aligned, and `params` row-long C arrays in a block's shared memory.
template <class S>
bool warpRowsFit(int64_t d, int params,
                 std::initializer_list<const void *> ps) {
  using C = typename FT<S>::C;
  return d % Pack<S>::N == 0 && aligned16(ps) &&
         d * params * static_cast<int64_t>(sizeof(C)) <= 48 * 1024;
}

/// normGradRows with a warp per row and 16-byte accesses (x, dy, dx and the
/// residual of one dtype S, n a multiple of Pack<S>::N, all aligned; the
/// scale staged in shared memory as A): the same arithmetic per element.
/// A block per row made a [16,384 x 768] bf16 gradient 0.49 ms on an H200.
template <class S, bool Rms>
__global__ void normGradRowsWarp(const S *x, const S *dy, In w, const S *res,
                                 S *dx, int64_t rows, int64_t n, float eps,
                                 typename FT<S>::C *stats) {
  using A = typename FT<S>::C;
  using P = Pack<S>;
  extern __shared__ float4 normShared[];
  A *ws = reinterpret_cast<A *>(normShared);
  stageParam(w, ws, n);
  int64_t nv = n / P::N, perBlock = blockDim.x >> 5;
  int lane = threadIdx.x & 31;
  A inv = A(1) / static_cast<A>(n);
  for (int64_t r = blockIdx.x * perBlock + (threadIdx.x >> 5); r < rows;
       r += gridDim.x * perBlock) {
    const P *xr = reinterpret_cast<const P *>(x + r * n);
    const P *gr = reinterpret_cast<const P *>(dy + r * n);
    const P *rr = res ? reinterpret_cast<const P *>(res + r * n) : nullptr;
    P *dr = reinterpret_cast<P *>(dx + r * n);
    A mean, rstd;
    warpRowStats<S, Rms>(xr, nv, n, eps, mean, rstd);
    A sumD = A(0), sumDX = A(0);
    for (int64_t v = lane; v < nv; v += 32) {
      P px = xr[v], pg = gr[v];
#pragma unroll
      for (int k = 0; k < P::N; ++k) {
        A xv = FT<S>::load(px.v[k]);
        A d = FT<S>::load(pg.v[k]) * ws[v * P::N + k];
        sumD += d;
        sumDX += d * (Rms ? xv : (xv - mean) * rstd);
      }
    }
    sumD = warpAllSum(sumD);
    sumDX = warpAllSum(sumDX);
    for (int64_t v = lane; v < nv; v += 32) {
      P px = xr[v], pg = gr[v], o;
      P pr = rr ? rr[v] : P{}; // before the store: may share memory
#pragma unroll
      for (int k = 0; k < P::N; ++k) {
        A xv = FT<S>::load(px.v[k]);
        A d = FT<S>::load(pg.v[k]) * ws[v * P::N + k];
        A g = Rms ? rstd * (d - xv * rstd * rstd * sumDX * inv)
                  : rstd * (d - sumD * inv - (xv - mean) * rstd * sumDX * inv);
        if (res) // the gradient rounded to S, then the residual added
          g = FT<S>::load(FT<S>::store(g)) + FT<S>::load(pr.v[k]);
        o.v[k] = FT<S>::store(g);
      }
      dr[v] = o;
    }
    if (lane == 0) {
      stats[2 * r] = mean;
      stats[2 * r + 1] = rstd;
    }
  }
}

/// warpRowStats of a row whose K vectors a lane holds (px[k]: vector
/// lane + 32 k): the same sums in the same order.
template <class S, bool Rms, int K, class C>
__device__ void heldRowStats(const Pack<S> (&px)[K], int64_t d, float eps,
                             C &mean, C &rstd) {
  mean = C(0);
  if (!Rms) {
    C sum = C(0);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int e = 0; e < Pack<S>::N; ++e)
        sum += FT<S>::load(px[k].v[e]);
    mean = warpAllSum(sum) / static_cast<C>(d);
  }
  C sq = C(0);
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int e = 0; e < Pack<S>::N; ++e) {
      C c = FT<S>::load(px[k].v[e]) - mean;
      sq += c * c;
    }
  sq = warpAllSum(sq);
  rstd = C(1) / dSqrt(sq / static_cast<C>(d) + static_cast<C>(eps));
}

/// normRowsWarp for f16/bf16 rows of d = 32 K Pack<S>::N values (K <= 4: a
/// transformer's hidden size up to 1,024): a lane holds its K vectors of
/// the row, read once with the K loads in flight (normRowsWarp read the
/// row three times, one vector a lane at a time), the statistics taken from
/// them (heldRowStats: the same sums in the same order) and the same
/// arithmetic per element. A block's warps take rowsPerBlock rows, the
/// parameters staged once for them (normRowsWarp's blocks took 8).
template <class S, bool Rms, int K>
__global__ void __launch_bounds__(kWarpRowsThreads)
    normRowsHeld(const S *x, S *y, int64_t rows, int64_t d, In scale, In bias,
                 float eps, int64_t rowsPerBlock) {
  using C = typename FT<S>::C;
  using P = Pack<S>;
  constexpr int N = P::N, kWarps = kWarpRowsThreads / 32;
  extern __shared__ float4 normShared[];
  C *sc = reinterpret_cast<C *>(normShared), *bi = sc + d;
  stageParam(scale, sc, d);
  stageParam(bias, bi, d);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t r0 = blockIdx.x * rowsPerBlock, r1 = min(rows, r0 + rowsPerBlock);
  for (int64_t r = r0 + warp; r < r1; r += kWarps) {
    const P *xr = reinterpret_cast<const P *>(x + r * d);
    P *yr = reinterpret_cast<P *>(y + r * d);
    P px[K];
#pragma unroll
    for (int k = 0; k < K; ++k)
      px[k] = xr[lane + 32 * k];
    C mean, rstd;
    heldRowStats<S, Rms, K>(px, d, eps, mean, rstd);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t v = lane + 32 * k;
      P o;
#pragma unroll
      for (int e = 0; e < N; ++e) {
        int64_t j = v * N + e;
        C val = (FT<S>::load(px[k].v[e]) - mean) * rstd * sc[j];
        if (bias.p)
          val += bi[j];
        o.v[e] = FT<S>::store(val);
      }
      yr[v] = o;
    }
  }
}

/// The K of normRowsHeld and normGradRowsSums for rows of d S values: d =
/// 32 K Pack<S>::N with K in 1..4 for f16/bf16; 0 where they do not apply.
template <class S> inline int heldVectors(int64_t d) {
  if constexpr (sizeof(S) != 2) {
    return 0;
  } else {
    int64_t k = d / (32 * Pack<S>::N);
    return k >= 1 && k <= 4 && k * 32 * Pack<S>::N == d ? static_cast<int>(k)
                                                        : 0;
  }
}

/// f(std::integral_constant<int, K>()) for K = k, one of heldVectors'
/// 1..4: the kernel instance of a row's vector count.
template <class F> void visitHeld(int k, F &&f) {
  if (k == 1)
    f(std::integral_constant<int, 1>());
  else if (k == 2)
    f(std::integral_constant<int, 2>());
  else if (k == 3)
    f(std::integral_constant<int, 3>());
  else
    f(std::integral_constant<int, 4>());
}

/// Rows a block of normGradRowsSums takes: 64 (8 a warp; GPT-2's 16,384
/// rows: 256 blocks, one wave of two an SM on an H100), or more where that
/// would make more than 512 blocks (each writes 2 n partial sums). The
/// shape's alone: the sums' grouping does not depend on the device.
inline int64_t sumsRowsPerBlock(int64_t rows) {
  return std::max<int64_t>(64, (rows + 511) / 512);
}

/// normGradRowsWarp with the parameters' gradients summed in the same pass
/// (f16/bf16 rows of n = 32 K Pack<S>::N values, K <= 4: a transformer's
/// hidden size up to 1,024), where normGradColumnsVec read x and dy a
/// second time. Block b takes rows [b rowsPerBlock, (b + 1) rowsPerBlock),
/// its warp w the rows w, w + 8, ...; lane l keeps the sums over its rows
/// of vectors l, l + 32, ... of dy x-hat (scale) and dy (bias), in A. The
/// block's warps add theirs in order through shared memory (after the
/// staged scale: n + 8 n A values) and write them to part[b n + j] and
/// part[(blocks + b) n + j] for columnSumsFinish. dx as
/// normGradRowsWarp's, x and dy read again from L1 for it: K <= 3 fits two
/// blocks an SM in 128 registers without spills (GPT-2's K = 3; holding
/// the row as well took 158), K = 4 one block in 168.
template <class S, bool Rms, int K>
__global__ void __launch_bounds__(kWarpRowsThreads, K <= 3 ? 2 : 1)
    normGradRowsSums(const S *x, const S *dy, In w, const S *res, S *dx,
                     int64_t rows, int64_t n, float eps, int64_t rowsPerBlock,
                     typename FT<S>::C *part) {
  using A = typename FT<S>::C;
  using P = Pack<S>;
  constexpr int N = P::N, kWarps = kWarpRowsThreads / 32;
  extern __shared__ float4 normShared[];
  A *ws = reinterpret_cast<A *>(normShared), *red = ws + n;
  stageParam(w, ws, n);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  A inv = A(1) / static_cast<A>(n), s[K][N], b[K][N];
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int e = 0; e < N; ++e)
      s[k][e] = b[k][e] = A(0);
  int64_t r0 = blockIdx.x * rowsPerBlock, r1 = min(rows, r0 + rowsPerBlock);
  for (int64_t r = r0 + warp; r < r1; r += kWarps) {
    const P *xr = reinterpret_cast<const P *>(x + r * n);
    const P *gr = reinterpret_cast<const P *>(dy + r * n);
    P px[K], pg[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      px[k] = xr[lane + 32 * k];
      pg[k] = gr[lane + 32 * k];
    }
    A mean, rstd;
    heldRowStats<S, Rms, K>(px, n, eps, mean, rstd);
    A sumD = A(0), sumDX = A(0);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int e = 0; e < N; ++e) {
        A xv = FT<S>::load(px[k].v[e]);
        A d = FT<S>::load(pg[k].v[e]) * ws[(lane + 32 * k) * N + e];
        sumD += d;
        sumDX += d * (Rms ? xv : (xv - mean) * rstd);
      }
    sumD = warpAllSum(sumD);
    sumDX = warpAllSum(sumDX);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      int64_t v = lane + 32 * k;
      // Read again (from L1): the registers hold the sums, not the row.
      P qx = xr[v], qg = gr[v], o;
      P pr = res ? reinterpret_cast<const P *>(res + r * n)[v] : P{};
#pragma unroll
      for (int e = 0; e < N; ++e) {
        A xv = FT<S>::load(qx.v[e]), gv = FT<S>::load(qg.v[e]);
        A d = gv * ws[v * N + e];
        A g = Rms ? rstd * (d - xv * rstd * rstd * sumDX * inv)
                  : rstd * (d - sumD * inv - (xv - mean) * rstd * sumDX * inv);
        if (res) // the gradient rounded to S, then the residual added
          g = FT<S>::load(FT<S>::store(g)) + FT<S>::load(pr.v[e]);
        o.v[e] = FT<S>::store(g);
        s[k][e] += gv * (Rms ? xv * rstd : (xv - mean) * rstd);
        b[k][e] += gv;
      }
      reinterpret_cast<P *>(dx + r * n)[v] = o;
    }
  }
  for (int kind = 0; kind < 2; ++kind) { // the scale's sums, the bias'
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int e = 0; e < N; ++e)
        red[warp * n + (lane + 32 * k) * N + e] = kind ? b[k][e] : s[k][e];
    __syncthreads();
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      A t = red[j];
      for (int q = 1; q < kWarps; ++q)
        t += red[q * n + j];
      part[(kind * int64_t(gridDim.x) + blockIdx.x) * n + j] = t;
    }
    __syncthreads();
  }
}

/// normGradColumns with 16-byte accesses: a thread sums Pack<S>::N
/// adjacent columns (x and dy of dtype S, n a multiple of Pack<S>::N,
/// aligned), a block 32 x N columns (vecColumnSums).
template <class S, bool Rms>
__global__ void normGradColumnsVec(const S *x, const S *dy,
                                   const typename FT<S>::C *stats, int64_t rows,
                                   int64_t n, int64_t chunkRows, Out ds, Out db,
                                   typename FT<S>::C *part) {
  using A = typename FT<S>::C;
  using P = Pack<S>;
  const P *xv = reinterpret_cast<const P *>(x);
  const P *gv = reinterpret_cast<const P *>(dy);
  int64_t nv = n / P::N;
  vecColumnSums<S, A>(rows, n, chunkRows, ds, db, part,
                      [&](int64_t r, int64_t v, A(&s)[P::N], A(&b)[P::N]) {
                        P pg = gv[r * nv + v], px = xv[r * nv + v];
                        A mean = Rms ? A(0) : stats[2 * r],
                          rstd = stats[2 * r + 1];
#pragma unroll
                        for (int k = 0; k < P::N; ++k) {
                          A g = FT<S>::load(pg.v[k]), xk = FT<S>::load(px.v[k]);
                          s[k] += g * (Rms ? xk * rstd : (xk - mean) * rstd);
                          b[k] += g;
                        }
                      });
}

} // namespace smp::kernels::cuda::detail

#endif // SMP_KERNELS_CUDA_NORMWARP_CUH
