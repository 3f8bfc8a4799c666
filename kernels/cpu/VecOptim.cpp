//===- VecOptim.cpp - The Adam update over f32 arrays ---------------------===//
//
// One pass over parameter, gradient and both moments, computed in double
// (the optimizer's state is f32, its arithmetic double, as before the
// kernel was vectorised). The AVX2 loop does the scalar loop's operations in
// the same order without FMA contraction, so both give the same bits; see
// VecMath.cpp for how the AVX2 functions are built and chosen.
//
//===----------------------------------------------------------------------===//

#include "VecMath.h"

#include <cmath>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SMP_VEC_X86 1
#define SMP_AVX2 __attribute__((target("avx2,fma")))
#endif

namespace smp::kernels::cpu::detail {

namespace {

/// Not inlined into adamAvx2 (its tail), where FMA contraction would change
/// the bits of the elements that a thread split leaves in a tail.
__attribute__((noinline)) void adamScalar(const AdamStep &s,
                                          const AdamArrays &a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double p = a.param[i], m = a.expAvg[i], v = a.expAvgSq[i];
    adamElement(s, p, a.grad[i], m, v);
    a.newParam[i] = static_cast<float>(p);
    a.newExpAvg[i] = static_cast<float>(m);
    a.newExpAvgSq[i] = static_cast<float>(v);
  }
}

#ifdef SMP_VEC_X86
SMP_AVX2 inline __m256d load4(const float *p) {
  return _mm256_cvtps_pd(_mm_loadu_ps(p));
}

SMP_AVX2 inline void store4(float *p, __m256d v) {
  _mm_storeu_ps(p, _mm256_cvtpd_ps(v));
}

SMP_AVX2 void adamAvx2(const AdamStep &s, const AdamArrays &a, int64_t n) {
  const __m256d decay = _mm256_set1_pd(s.decay),
                wd = _mm256_set1_pd(s.weightDecay),
                b1c = _mm256_set1_pd(s.oneMinusBeta1),
                b2 = _mm256_set1_pd(s.beta2),
                b2c = _mm256_set1_pd(s.oneMinusBeta2),
                step = _mm256_set1_pd(s.stepSize),
                bc2 = _mm256_set1_pd(s.bc2Sqrt),
                eps = _mm256_set1_pd(s.epsilon);
  bool l2 = !s.decoupled && s.weightDecay != 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d p = load4(a.param + i), g = load4(a.grad + i);
    __m256d m = load4(a.expAvg + i), v = load4(a.expAvgSq + i);
    if (s.decoupled)
      p = _mm256_mul_pd(p, decay);
    else if (l2)
      g = _mm256_add_pd(g, _mm256_mul_pd(wd, p));
    m = _mm256_add_pd(m, _mm256_mul_pd(b1c, _mm256_sub_pd(g, m)));
    v = _mm256_add_pd(_mm256_mul_pd(v, b2),
                      _mm256_mul_pd(_mm256_mul_pd(b2c, g), g));
    __m256d den =
        _mm256_add_pd(_mm256_div_pd(_mm256_sqrt_pd(v), bc2), eps);
    p = _mm256_sub_pd(p, _mm256_div_pd(_mm256_mul_pd(step, m), den));
    store4(a.newParam + i, p);
    store4(a.newExpAvg + i, m);
    store4(a.newExpAvgSq + i, v);
  }
  adamScalar(s, a.at(i), n - i);
}
#endif

} // namespace

void vecAdam(const AdamStep &s, const AdamArrays &a, int64_t n) {
#ifdef SMP_VEC_X86
  if (vecSimdActive())
    return adamAvx2(s, a, n);
#endif
  adamScalar(s, a, n);
}

} // namespace smp::kernels::cpu::detail
