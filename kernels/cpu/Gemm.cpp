//===- Gemm.cpp - GEMMs on the OpenMP threads, OpenBLAS single-threaded ---===//
//
// OpenBLAS (pthreads build) has its own thread pool, whose workers spin for a
// while after each call; the OpenMP workers do the same after each loop. With
// both pools running, the elementwise loops between two GEMMs share the cores
// with spinning BLAS threads and vice versa. So OpenBLAS stays at one thread
// (setNumThreads) and every GEMM is split over the OpenMP threads here into
// tiles (whole products, or row or column blocks of one), each a plain
// single-threaded ?gemm.
//
// Same bytes for any thread count: OpenBLAS's result for an element depends
// on the shape of the call it is in (its kernels take other paths, with
// other summation orders, for other m or n: on Zen/Haswell a 4-row block of
// an 8-row product gives other last bits than the whole product). So the
// tiles of an OpenBLAS product are chosen from the product's shape alone,
// never from the thread count, and the threads only share out the tiles.
// The choice between OpenBLAS and our own kernel is made once per product
// shape, also never per tile.
//
// f32 products whose B is small once packed (K x N up to 128K elements, or
// K <= 128 with N taken in blocks), such as the two products of attention
// ([T, 64] x [64, T] and [T, T] x [T, 64]), run on our own AVX2/FMA kernel
// instead where the CPU has it: OpenBLAS reaches ~75% of its large-GEMM
// speed on them (measured on Zen 4: 77-85 vs 102-106 GFLOPS per core). Each
// element of C is one sequential FMA chain over k, whatever the blocking, so
// those products are split by the thread count.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "VecMath.h"

#include <cblas.h>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define SMP_GEMM_X86 1
#endif

namespace smp::kernels::cpu::detail {

namespace {

#ifdef SMP_GEMM_X86
#define SMP_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kMR = 6, kNR = 16;
/// Packed B block: 128K floats (512 KiB) stays in a core's L2.
constexpr int64_t kPackFloats = int64_t(128) << 10;

/// C[6][16] = sum over p < k of rows[r][p] * bp[p][0..16), one FMA chain per
/// element, accumulators in 12 registers: the loops over r must unroll
/// fully (the pragmas) for the array to live in registers.
SMP_AVX2 void microKernel(int64_t k, const float *const *rows, const float *bp,
                          float *c, int64_t ldc) {
  __m256 acc[kMR][2];
#pragma GCC unroll 6
  for (int64_t r = 0; r < kMR; ++r)
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p, bp += kNR) {
    __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 6
    for (int64_t r = 0; r < kMR; ++r) {
      __m256 v = _mm256_broadcast_ss(rows[r] + p);
      acc[r][0] = _mm256_fmadd_ps(v, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(v, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int64_t r = 0; r < kMR; ++r) {
    _mm256_storeu_ps(c + r * ldc, acc[r][0]);
    _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
  }
}

/// dst[p][q] = op(B)[p][j0 + q] for p < k, q < 16 (0 beyond column j0 + w).
void packPanel(bool transB, int64_t k, int64_t j0, int64_t w, const float *b,
               int64_t ldb, float *dst) {
  for (int64_t p = 0; p < k; ++p, dst += kNR) {
    if (!transB && w == kNR) {
      std::memcpy(dst, b + p * ldb + j0, sizeof(float) * kNR);
      continue;
    }
    for (int64_t q = 0; q < kNR; ++q)
      dst[q] = q >= w   ? 0.0f
               : transB ? b[(j0 + q) * ldb + p]
                        : b[p * ldb + j0 + q];
  }
}

/// C = A op(B) (A not transposed) on microKernel: B packed in blocks of
/// columns, 6-row blocks of A read in place (rows past m point at zeros and
/// partial tiles go through a local tile).
void smallSgemm(bool transB, int64_t m, int64_t n, int64_t k, const float *a,
                int64_t lda, const float *b, int64_t ldb, float *c,
                int64_t ldc) {
  thread_local std::vector<float> pack, zeros;
  if (static_cast<int64_t>(zeros.size()) < k)
    zeros.assign(static_cast<size_t>(k), 0.0f);
  int64_t nc = std::max(kNR, kPackFloats / k / kNR * kNR);
  for (int64_t j0 = 0; j0 < n; j0 += nc) {
    int64_t jn = std::min(nc, n - j0), panels = (jn + kNR - 1) / kNR;
    pack.resize(static_cast<size_t>(panels * kNR * k));
    for (int64_t q = 0; q < panels; ++q)
      packPanel(transB, k, j0 + q * kNR, std::min(kNR, jn - q * kNR), b, ldb,
                pack.data() + q * kNR * k);
    for (int64_t i = 0; i < m; i += kMR) {
      int64_t rowsHere = std::min(kMR, m - i);
      const float *rows[kMR];
      for (int64_t r = 0; r < kMR; ++r)
        rows[r] = r < rowsHere ? a + (i + r) * lda : zeros.data();
      for (int64_t q = 0; q < panels; ++q) {
        int64_t w = std::min(kNR, jn - q * kNR);
        float *ct = c + i * ldc + j0 + q * kNR;
        const float *bp = pack.data() + q * kNR * k;
        if (rowsHere == kMR && w == kNR) {
          microKernel(k, rows, bp, ct, ldc);
          continue;
        }
        float tile[kMR * kNR];
        microKernel(k, rows, bp, tile, kNR);
        for (int64_t r = 0; r < rowsHere; ++r)
          std::memcpy(ct + r * ldc, tile + r * kNR, sizeof(float) * w);
      }
    }
  }
}

/// Where smallSgemm beats OpenBLAS: small packed B (or short K, with N in
/// blocks), A rows short enough to stay in L1, A not transposed, enough
/// rows to fill the 6-row tiles.
bool useSmallSgemm(bool transA, int64_t m, int64_t n, int64_t k) {
  return !transA && m >= 4 * kMR && k >= 1 && k <= 1024 &&
         (k <= 128 || k * n <= kPackFloats) && vecSimdActive();
}
#endif

/// Whether products of shape g run on smallSgemm (decided for the whole
/// product: a tile of it must not take the other path).
template <class T> bool useOwnKernel(const GemmShape &g) {
#ifdef SMP_GEMM_X86
  if constexpr (std::is_same_v<T, float>)
    return useSmallSgemm(g.transA, g.m, g.n, g.k);
#endif
  (void)g;
  return false;
}

template <class T>
void gemmOne(bool own, bool transA, bool transB, int64_t m, int64_t n,
             int64_t k, const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
             int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
#ifdef SMP_GEMM_X86
  if constexpr (std::is_same_v<T, float>)
    if (own) {
      smallSgemm(transB, m, n, k, a, lda, b, ldb, c, ldc);
      return;
    }
#endif
  (void)own;
  auto ta = transA ? CblasTrans : CblasNoTrans;
  auto tb = transB ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b,
                static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), 1.0, a, static_cast<int>(lda), b,
                static_cast<int>(ldb), 0.0, c, static_cast<int>(ldc));
}

/// How the products of one gemmBatch are cut: each product in a grid of
/// rowTiles x colTiles blocks of rowLen x colLen (the last ones shorter).
/// Block (r, q) of product i is task (i * rowTiles + r) * colTiles + q.
struct Tiling {
  int64_t rowTiles = 1, colTiles = 1, rowLen = 0, colLen = 0;
  int64_t perProduct() const { return rowTiles * colTiles; }
};

/// Below ~1M multiply-adds a product takes tens of microseconds: threads
/// would cost about as much as they save.
constexpr double kMinParallelMacs = double(1 << 20);

/// OpenBLAS blocks: about kTargetTasks per batch (enough for 16 threads,
/// 6% imbalance at 3), none with a side under kMinTile (every block packs
/// its rows of A and columns of B again: 256-long sides cost ~3% on one
/// thread on Zen, 64-long ones ~10%); then at least kMinTasks with sides
/// down to kMinSide; none under kMinTileMacs.
constexpr int64_t kTargetTasks = 16, kMinTile = 256, kMinTasks = 4,
                  kMinSide = 64;
constexpr double kMinTileMacs = double(1 << 19);

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// `tiles` blocks of [0, len) on whole 16-wide register tiles where long
/// enough: sets the block length and returns the block count.
int64_t cut(int64_t len, int64_t tiles, int64_t &blockLen) {
  blockLen = ceilDiv(len, tiles);
  if (tiles > 1 && len >= 32 * tiles)
    blockLen = ceilDiv(blockLen, 16) * 16;
  return ceilDiv(len, blockLen);
}

/// The tiling of nb products of shape g. For OpenBLAS products it depends
/// on the shapes only (see the file comment); `threads` only shapes the
/// tiling of our own kernel's products, whose elements do not depend on it.
Tiling makeTiling(const GemmShape &g, int64_t nb, bool own, int threads) {
  int64_t tm = 1, tn = 1;
  double macs = double(g.m) * double(g.n) * double(std::max<int64_t>(g.k, 1));
  bool parallel = macs * double(nb) >= kMinParallelMacs;
  if (own) {
    // Whole products per thread when they divide evenly or are many; else
    // every product in `threads` blocks along its longer side (each block
    // packs the other operand again, so the longer side costs least).
    int64_t len = std::max(g.m, g.n);
    bool whole = !parallel || threads <= 1 || nb % threads == 0 ||
                 nb >= 8 * threads || len < 2 * threads;
    if (!whole)
      (g.m >= g.n ? tm : tn) = threads;
  } else if (parallel) {
    // About kTargetTasks blocks per batch; each block packs its rows of A
    // and its columns of B again (the cost falls with the block's side), so
    // the longer side of the blocks is cut next, none under kMinTile.
    // Products too small for that still get kMinTasks blocks (sides down
    // to kMinSide) when they have the work.
    auto split = [&](int64_t want, int64_t minSide) {
      while (tm * tn < want) {
        bool rowsOk = g.m / (tm + 1) >= minSide;
        bool colsOk = g.n / (tn + 1) >= minSide;
        if (!rowsOk && !colsOk)
          return;
        bool rows = rowsOk && (!colsOk || ceilDiv(g.m, tm) >= ceilDiv(g.n, tn));
        int64_t nm = tm + (rows ? 1 : 0), nn = tn + (rows ? 0 : 1);
        if (macs / double(nm * nn) < kMinTileMacs)
          return;
        tm = nm;
        tn = nn;
      }
    };
    split(ceilDiv(kTargetTasks, nb), kMinTile);
    split(ceilDiv(kMinTasks, nb), kMinSide);
  }
  Tiling t;
  t.rowTiles = cut(g.m, tm, t.rowLen);
  t.colTiles = cut(g.n, tn, t.colLen);
  return t;
}

} // namespace

template <class T>
void gemmBatch(const GemmShape &g, const T *a, const int64_t *offA, const T *b,
               const int64_t *offB, T *c, int64_t strideC, int64_t nb) {
  if (nb <= 0 || g.m <= 0 || g.n <= 0)
    return;
#ifdef SMP_HAVE_OPENBLAS
  // Also when the host never called setNumThreads.
  static const bool blasSingleThreaded = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)blasSingleThreaded;
#endif
  bool own = useOwnKernel<T>(g);
  int threads = maxThreads();
  Tiling tl = makeTiling(g, nb, own, threads);
  auto runTask = [&](int64_t task) {
    int64_t i = task / tl.perProduct(), r = task % tl.perProduct();
    int64_t i0 = r / tl.colTiles * tl.rowLen, j0 = r % tl.colTiles * tl.colLen;
    int64_t i1 = std::min(g.m, i0 + tl.rowLen),
            j1 = std::min(g.n, j0 + tl.colLen);
    const T *pa = a + offA[i] + (g.transA ? i0 : i0 * g.lda);
    const T *pb = b + offB[i] + (g.transB ? j0 * g.ldb : j0);
    gemmOne(own, g.transA, g.transB, i1 - i0, j1 - j0, g.k, pa, g.lda, pb,
            g.ldb, c + i * strideC + i0 * g.ldc + j0, g.ldc);
  };
  int64_t tasks = nb * tl.perProduct();
  double macs = double(g.m) * double(g.n) * double(std::max<int64_t>(g.k, 1)) *
                double(nb);
  if (threads > 1 && macs < kMinParallelMacs)
    threads = 1;
  threads = static_cast<int>(std::min<int64_t>(threads, tasks));
  if (threads <= 1) {
    for (int64_t task = 0; task < tasks; ++task)
      runTask(task);
    return;
  }
  // Contiguous runs of tasks per thread: a thread's tiles of one product
  // share the packed operand's cache lines.
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
#ifdef _OPENMP
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    int t = 0, nt = 1;
#endif
    for (int64_t task = tasks * t / nt; task < tasks * (t + 1) / nt; ++task)
      runTask(task);
  }
}

template void gemmBatch<float>(const GemmShape &, const float *,
                               const int64_t *, const float *, const int64_t *,
                               float *, int64_t, int64_t);
template void gemmBatch<double>(const GemmShape &, const double *,
                                const int64_t *, const double *,
                                const int64_t *, double *, int64_t, int64_t);

} // namespace smp::kernels::cpu::detail
