//===- Gemm.cpp - GEMMs on the OpenMP threads, OpenBLAS single-threaded ---===//
//
// OpenBLAS (pthreads build) has its own thread pool, whose workers spin for a
// while after each call; the OpenMP workers do the same after each loop. With
// both pools running, the elementwise loops between two GEMMs share the cores
// with spinning BLAS threads and vice versa. So OpenBLAS stays at one thread
// (setNumThreads) and every GEMM is split over the OpenMP threads here: whole
// products per thread when a batch has enough of them, else each product cut
// into row or column blocks, each a plain single-threaded ?gemm.
//
// f32 products whose B is small once packed (K x N up to 128K elements, or
// K <= 128 with N taken in blocks), such as the two products of attention
// ([T, 64] x [64, T] and [T, T] x [T, 64]), run on our own AVX2/FMA kernel
// instead where the CPU has it: OpenBLAS reaches ~75% of its large-GEMM
// speed on them (measured on Zen 4: 77-85 vs 102-106 GFLOPS per core). Each
// element of C is one sequential FMA chain over k, whatever the blocking.
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
/// element, accumulators in 12 registers.
SMP_AVX2 void microKernel(int64_t k, const float *const *rows, const float *bp,
                          float *c, int64_t ldc) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
         c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00,
         c51 = c00;
  const float *a0 = rows[0], *a1 = rows[1], *a2 = rows[2], *a3 = rows[3],
              *a4 = rows[4], *a5 = rows[5];
  for (int64_t p = 0; p < k; ++p, bp += kNR) {
    __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8), v;
    v = _mm256_broadcast_ss(a0 + p);
    c00 = _mm256_fmadd_ps(v, b0, c00);
    c01 = _mm256_fmadd_ps(v, b1, c01);
    v = _mm256_broadcast_ss(a1 + p);
    c10 = _mm256_fmadd_ps(v, b0, c10);
    c11 = _mm256_fmadd_ps(v, b1, c11);
    v = _mm256_broadcast_ss(a2 + p);
    c20 = _mm256_fmadd_ps(v, b0, c20);
    c21 = _mm256_fmadd_ps(v, b1, c21);
    v = _mm256_broadcast_ss(a3 + p);
    c30 = _mm256_fmadd_ps(v, b0, c30);
    c31 = _mm256_fmadd_ps(v, b1, c31);
    v = _mm256_broadcast_ss(a4 + p);
    c40 = _mm256_fmadd_ps(v, b0, c40);
    c41 = _mm256_fmadd_ps(v, b1, c41);
    v = _mm256_broadcast_ss(a5 + p);
    c50 = _mm256_fmadd_ps(v, b0, c50);
    c51 = _mm256_fmadd_ps(v, b1, c51);
  }
  _mm256_storeu_ps(c, c00);
  _mm256_storeu_ps(c + 8, c01);
  _mm256_storeu_ps(c + ldc, c10);
  _mm256_storeu_ps(c + ldc + 8, c11);
  _mm256_storeu_ps(c + 2 * ldc, c20);
  _mm256_storeu_ps(c + 2 * ldc + 8, c21);
  _mm256_storeu_ps(c + 3 * ldc, c30);
  _mm256_storeu_ps(c + 3 * ldc + 8, c31);
  _mm256_storeu_ps(c + 4 * ldc, c40);
  _mm256_storeu_ps(c + 4 * ldc + 8, c41);
  _mm256_storeu_ps(c + 5 * ldc, c50);
  _mm256_storeu_ps(c + 5 * ldc + 8, c51);
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

template <class T>
void gemmOne(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
             const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
             int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
#ifdef SMP_GEMM_X86
  if constexpr (std::is_same_v<T, float>)
    if (useSmallSgemm(transA, m, n, k)) {
      smallSgemm(transB, m, n, k, a, lda, b, ldb, c, ldc);
      return;
    }
#endif
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

/// Block `part` of `parts` of [0, n), boundaries on multiples of `align`.
std::pair<int64_t, int64_t> block(int64_t n, int64_t part, int64_t parts,
                                  int64_t align) {
  auto edge = [&](int64_t p) {
    if (p >= parts)
      return n;
    int64_t e = n * p / parts;
    return std::min(n, (e + align / 2) / align * align);
  };
  return {edge(part), edge(part + 1)};
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
  auto run = [&](int64_t i, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const T *pa = a + offA[i] + (g.transA ? i0 : i0 * g.lda);
    const T *pb = b + offB[i] + (g.transB ? j0 * g.ldb : j0);
    gemmOne(g.transA, g.transB, i1 - i0, j1 - j0, g.k, pa, g.lda, pb, g.ldb,
            c + i * strideC + i0 * g.ldc + j0, g.ldc);
  };
  double macs = double(g.m) * double(g.n) * double(std::max<int64_t>(g.k, 1)) *
                double(nb);
  int threads = maxThreads();
  // Below ~1M multiply-adds a product takes tens of microseconds: threads
  // would cost about as much as they save.
  if (threads > 1 && macs < double(1 << 20))
    threads = 1;
  if (threads <= 1) {
    for (int64_t i = 0; i < nb; ++i)
      run(i, 0, g.m, 0, g.n);
    return;
  }
  // Whole products per thread when they divide evenly or are many; else
  // every product split in `threads` blocks along its longer side (each
  // block packs the other operand again, so the longer side costs least).
  bool wholeProducts = nb % threads == 0 || nb >= 8 * threads;
  bool splitRows = g.m >= g.n;
  int64_t len = splitRows ? g.m : g.n;
  if (!wholeProducts && len < 2 * threads) // too thin to split: by products
    wholeProducts = true;
  if (wholeProducts)
    threads = static_cast<int>(std::min<int64_t>(threads, nb));
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
#endif
  {
#ifdef _OPENMP
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    int t = 0, nt = 1;
#endif
    if (wholeProducts) {
      auto [b0, b1] = block(nb, t, nt, 1);
      for (int64_t i = b0; i < b1; ++i)
        run(i, 0, g.m, 0, g.n);
    } else {
      // Blocks on multiples of 16 rows/columns: whole register tiles and
      // cache lines.
      auto [s0, s1] = block(len, t, nt, len >= 32 * nt ? 16 : 1);
      for (int64_t i = 0; i < nb; ++i) {
        if (splitRows)
          run(i, s0, s1, 0, g.n);
        else
          run(i, 0, g.m, s0, s1);
      }
    }
  }
}

template void gemmBatch<float>(const GemmShape &, const float *,
                               const int64_t *, const float *, const int64_t *,
                               float *, int64_t, int64_t);
template void gemmBatch<double>(const GemmShape &, const double *,
                                const int64_t *, const double *,
                                const int64_t *, double *, int64_t, int64_t);

} // namespace smp::kernels::cpu::detail
