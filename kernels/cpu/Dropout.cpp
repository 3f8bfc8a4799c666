//===- Dropout.cpp - smp.dropout's kernel ---------------------------------===//
//
// The mask is common/Dropout.h's: each element's word is a function of its
// global index (no sum), so any split of the loop gives the same bits.
// Consecutive global indices share a draw of four words; with AVX2 eight
// draws run at once (32 consecutive indices), the same words as the scalar
// Philox (Dropout.DrawsTheSameWordsWithAndWithoutSimd). Runs of consecutive
// global indices (the whole tensor without a split, a block of the split
// dim times its inner extent with one) are drawn as factors (1 / (1 - p) or 0)
// a run at a time, with AVX2 compared and transposed into index order in
// registers, and then applied in a loop the compiler vectorises; short runs go
// element by element.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "DropoutRun.h"
#include "VecMath.h"

#include "smp/kernels/common/Dropout.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SMP_DROPOUT_X86 1
#endif

namespace smp::kernels::cpu {
using namespace detail;

namespace {

/// The words of `lanes` consecutive draws (counters q, q + 1, ...):
/// word r of draw j is words[r][j].
template <int Lanes> struct Window {
  bool drawn = false;
  uint64_t first = 0; // counter of draw 0
  uint32_t words[4][Lanes];
};

void drawScalar(const common::DropoutPlan &p, uint64_t q, Window<1> &w) {
  uint32_t out[4];
  common::dropoutWords(p, q << 2, out);
  for (int r = 0; r < 4; ++r)
    w.words[r][0] = out[r];
  w.first = q, w.drawn = true;
}

#ifdef SMP_DROPOUT_X86
#define SMP_AVX2 __attribute__((target("avx2")))

/// hi and lo 32 bits of a x m, lane by lane.
SMP_AVX2 inline void mulHiLo8(__m256i a, __m256i m, __m256i &hi, __m256i &lo) {
  __m256i even = _mm256_mul_epu32(a, m);
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/// The four words of Philox4x32-10 (common::philox4x32x10) of counters
/// q .. q + 7: word r of counter q + j is lane j of c[r].
SMP_AVX2 inline void philox8(const common::DropoutPlan &p, uint64_t q,
                             __m256i c[4]) {
  alignas(32) uint32_t low[8], high[8];
  for (int j = 0; j < 8; ++j) {
    low[j] = static_cast<uint32_t>(q + j);
    high[j] = static_cast<uint32_t>((q + j) >> 32);
  }
  __m256i c0 = _mm256_load_si256(reinterpret_cast<const __m256i *>(low));
  __m256i c1 = _mm256_load_si256(reinterpret_cast<const __m256i *>(high));
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(p.stream));
  __m256i c3 = _mm256_set1_epi32(static_cast<int>(p.step));
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(common::kPhiloxM0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(common::kPhiloxM1));
  uint32_t k0 = p.key[0], k1 = p.key[1];
  for (int r = 0; r < 10; ++r) {
    __m256i hi0, lo0, hi1, lo1;
    mulHiLo8(c0, m0, hi0, lo0);
    mulHiLo8(c2, m1, hi1, lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1),
                          _mm256_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3),
                          _mm256_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += common::kPhiloxW0;
    k1 += common::kPhiloxW1;
  }
  c[0] = c0, c[1] = c1, c[2] = c2, c[3] = c3;
}

SMP_AVX2 void drawAvx2(const common::DropoutPlan &p, uint64_t q, Window<8> &w) {
  __m256i c[4];
  philox8(p, q, c);
  __m256i *out = reinterpret_cast<__m256i *>(w.words);
  for (int r = 0; r < 4; ++r)
    _mm256_storeu_si256(out + r, c[r]);
  w.first = q, w.drawn = true;
}

/// z[0, 32) = the factors of global indices 4 q .. 4 q + 31 (1 / (1 - p)
/// where kept, else 0): the words compared with the threshold (unsigned
/// >=) and transposed from word-major to index order in registers.
SMP_AVX2 void factorsAvx2(const common::DropoutPlan &p, uint64_t q, float *z) {
  __m256i c[4];
  philox8(p, q, c);
  __m256i thr = _mm256_set1_epi32(static_cast<int>(p.threshold));
  __m256 scale = _mm256_set1_ps(p.scale), f[4];
  for (int r = 0; r < 4; ++r) {
    __m256i keep = _mm256_cmpeq_epi32(_mm256_max_epu32(c[r], thr), c[r]);
    f[r] = _mm256_and_ps(_mm256_castsi256_ps(keep), scale);
  }
  // f[r] lane j is index 4 j + r: a 4 x 8 transpose.
  __m256 t0 = _mm256_unpacklo_ps(f[0], f[1]),
         t1 = _mm256_unpackhi_ps(f[0], f[1]);
  __m256 t2 = _mm256_unpacklo_ps(f[2], f[3]),
         t3 = _mm256_unpackhi_ps(f[2], f[3]);
  __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44),
         u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44),
         u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  _mm256_storeu_ps(z, _mm256_permute2f128_ps(u0, u1, 0x20));
  _mm256_storeu_ps(z + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
  _mm256_storeu_ps(z + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
  _mm256_storeu_ps(z + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
}
#endif

/// z[c] = the factor of global index g0 + c for c < n, from draws of
/// `Lanes` counters (those of the windows the run covers only in part; with
/// `whole`, each window inside the run writes its 4 Lanes factors itself).
template <int Lanes, class Draw, class Whole>
void factorRun(const common::DropoutPlan &p, uint64_t g0, int64_t n, float *z,
               Draw draw, Whole whole) {
  uint64_t end = g0 + static_cast<uint64_t>(n);
  Window<Lanes> w;
  for (uint64_t q = g0 >> 2; q << 2 < end; q += Lanes) {
    uint64_t first = q << 2, last = first + 4 * Lanes;
    if (first >= g0 && last <= end) {
      whole(p, q, z + (first - g0));
      continue;
    }
    draw(p, q, w);
    for (int lane = 0; lane < Lanes; ++lane)
      for (int r = 0; r < 4; ++r) {
        uint64_t g = ((q + lane) << 2) + r;
        if (g >= g0 && g < end)
          z[g - g0] = w.words[r][lane] >= p.threshold ? p.scale : 0.0f;
      }
  }
}

/// A window of one counter, inside the run: its four factors.
void factorsScalar(const common::DropoutPlan &p, uint64_t q, float *z) {
  uint32_t words[4];
  common::dropoutWords(p, q << 2, words);
  for (int r = 0; r < 4; ++r)
    z[r] = words[r] >= p.threshold ? p.scale : 0.0f;
}

/// y[i0, i1) with the draws of `draw` (refilled when an element's counter
/// leaves the window): element by element, for a split whose runs of
/// consecutive global indices are short.
template <class S, int Lanes, class Draw>
void dropoutRange(const common::DropoutPlan &plan, const S *x, S *y, int64_t i0,
                  int64_t i1, Draw draw) {
  using C = typename Float<S>::C;
  C scale = static_cast<C>(plan.scale);
  Window<Lanes> w;
  for (int64_t i = i0; i < i1; ++i) {
    uint64_t g = static_cast<uint64_t>(common::dropoutGlobalIndex(plan, i));
    uint64_t lane = (g >> 2) - w.first;
    if (!w.drawn || lane >= static_cast<uint64_t>(Lanes)) {
      draw(plan, g >> 2, w);
      lane = 0;
    }
    bool keep = !plan.dropAll && w.words[g & 3][lane] >= plan.threshold;
    y[i] = Float<S>::store(keep ? Float<S>::load(x[i]) * scale : C(0));
  }
}

/// Runs of local elements with consecutive global indices at least this
/// long are drawn a run at a time (dropoutFactorRun) and then scaled.
constexpr int64_t kMinRun = 32;
constexpr int64_t kChunk = 1024;

/// y[i0, i1) a run of consecutive global indices at a time (each at most
/// `run` long, aligned to multiples of it: a block of the split dim times
/// its inner extent).
template <class S>
void dropoutRuns(const common::DropoutPlan &plan, const S *x, S *y, int64_t i0,
                 int64_t i1, int64_t run) {
  using C = typename Float<S>::C;
  C scale = static_cast<C>(plan.scale);
  float z[kChunk];
  for (int64_t i = i0; i < i1;) {
    int64_t n = std::min({kChunk, i1 - i, run - i % run});
    dropoutFactorRun(
        plan, static_cast<uint64_t>(common::dropoutGlobalIndex(plan, i)), n, z);
    for (int64_t c = 0; c < n; ++c)
      y[i + c] =
          Float<S>::store(z[c] != 0 ? Float<S>::load(x[i + c]) * scale : C(0));
    i += n;
  }
}

} // namespace

namespace detail {

void dropoutFactorRun(const common::DropoutPlan &p, uint64_t g0, int64_t n,
                      float *z) {
  if (p.dropAll) {
    std::fill_n(z, n, 0.0f);
    return;
  }
#ifdef SMP_DROPOUT_X86
  if (vecSimdActive())
    return factorRun<8>(p, g0, n, z, drawAvx2, factorsAvx2);
#endif
  factorRun<1>(p, g0, n, z, drawScalar, factorsScalar);
}

} // namespace detail

Status dropout(const TensorRef &in, const DropoutKey &key,
               const TensorRef &out) {
  common::DropoutPlan plan;
  SMP_RETURN_IF_ERROR(common::planDropout(key, in, out, plan));
  int64_t n = in.numel();
  bool simd = vecSimdActive();
  return visitFloat(in.dtype, "dropout", [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S *x = in.as<S>();
    S *y = out.as<S>();
    // Consecutive local elements have consecutive global indices within a
    // block of the split dim times the inner extent (everywhere without a
    // split).
    int64_t run =
        plan.split ? plan.blockSize * plan.inner : std::max<int64_t>(n, 1);
    parallelFor(n, grainFor(16), [&](int64_t i0, int64_t i1) {
      if (run >= kMinRun)
        return dropoutRuns<S>(plan, x, y, i0, i1, run);
#ifdef SMP_DROPOUT_X86
      if (simd)
        return dropoutRange<S, 8>(plan, x, y, i0, i1, drawAvx2);
#endif
      (void)simd;
      dropoutRange<S, 1>(plan, x, y, i0, i1, drawScalar);
    });
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
