//===- Dropout.cpp - smp.dropout's kernel ---------------------------------===//
//
// The mask is common/Dropout.h's: each element's word is a function of its
// global index (no sum), so any split of the loop gives the same bits.
// Consecutive global indices share a draw of four words; with AVX2 eight
// draws run at once (32 consecutive indices), the same words as the scalar
// Philox (Dropout.DrawsTheSameWordsWithAndWithoutSimd).
//
//===----------------------------------------------------------------------===//

#include "Common.h"
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

/// Philox4x32-10 (common::philox4x32x10) of counters q .. q + 7.
SMP_AVX2 void drawAvx2(const common::DropoutPlan &p, uint64_t q, Window<8> &w) {
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
  __m256i *out = reinterpret_cast<__m256i *>(w.words);
  _mm256_storeu_si256(out + 0, c0);
  _mm256_storeu_si256(out + 1, c1);
  _mm256_storeu_si256(out + 2, c2);
  _mm256_storeu_si256(out + 3, c3);
  w.first = q, w.drawn = true;
}
#endif

/// y[i0, i1) with the draws of `draw` (refilled when an element's counter
/// leaves the window).
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

} // namespace

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
    parallelFor(n, grainFor(16), [&](int64_t i0, int64_t i1) {
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
