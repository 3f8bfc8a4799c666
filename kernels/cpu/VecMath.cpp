//===- VecMath.cpp - Vectorised f32 math for the CPU kernels --------------===//
//
// The AVX2 functions carry __attribute__((target("avx2,fma"))) instead of the
// file being compiled with -mavx2, so nothing else (no inline function from a
// header) is built for AVX2 and the library runs on any x86-64. They are only
// called after __builtin_cpu_supports says the CPU (and OS) has AVX2 and FMA.
//
// exp(x): n = round(x log2 e), r = x - n ln2 (two-constant Cody-Waite split,
// exact with FMA), e^r by the Cephes expf polynomial on |r| <= ln2 / 2, and
// the result scaled by 2^n in two steps so that subnormal results round once
// and large ones overflow to inf. Inputs above 88.8 are clamped to it (the
// result still overflows to inf), inputs below -104 give 0 (no subnormal
// arithmetic), NaN passes through.
//
//===----------------------------------------------------------------------===//

#include "VecMath.h"
#include "smp/kernels/cpu/Kernels.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SMP_VEC_X86 1
#endif

namespace smp::kernels::cpu::detail {

namespace {

//===----------------------------------------------------------------------===//
// Fallback: the C library, one element at a time
//===----------------------------------------------------------------------===//

constexpr double kSqrt2OverPiD = 0.79788456080286535588;
constexpr double kGeluCubicD = 0.044715;

float sigmoidScalar(float x) {
  if (x >= 0)
    return 1.0f / (1.0f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.0f + e);
}

/// 0.5 x (1 + tanh u) = x sigmoid(2u) = x / (1 + e^-2u), in double.
float geluTanhScalar(float x) {
  double d = x, a = 2.0 * kSqrt2OverPiD * (d + kGeluCubicD * d * d * d);
  double e = std::exp(-std::fabs(a));
  return static_cast<float>((a < 0 ? d * e : d) / (1.0 + e));
}

float geluTanhGradScalar(float x, float dy) {
  return static_cast<float>(static_cast<double>(dy) * geluTanhDerivative(x));
}

void mapScalar(VecOp op, const float *x, float *y, int64_t n) {
  switch (op) {
  case VecOp::Exp:
    for (int64_t i = 0; i < n; ++i)
      y[i] = std::exp(x[i]);
    return;
  case VecOp::Tanh:
    for (int64_t i = 0; i < n; ++i)
      y[i] = std::tanh(x[i]);
    return;
  case VecOp::Sigmoid:
    for (int64_t i = 0; i < n; ++i)
      y[i] = sigmoidScalar(x[i]);
    return;
  case VecOp::Silu:
    for (int64_t i = 0; i < n; ++i)
      y[i] = x[i] * sigmoidScalar(x[i]);
    return;
  case VecOp::GeluTanh:
    for (int64_t i = 0; i < n; ++i)
      y[i] = geluTanhScalar(x[i]);
    return;
  }
}

float maxScalar(const float *x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}

double expSumScalar(const float *x, float *y, int64_t n, float shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = static_cast<float>(
        std::exp(static_cast<double>(x[i]) - static_cast<double>(shift)));
    sum += static_cast<double>(y[i]);
  }
  return sum;
}

//===----------------------------------------------------------------------===//
// AVX2 + FMA
//===----------------------------------------------------------------------===//

#ifdef SMP_VEC_X86
#define SMP_AVX2 __attribute__((target("avx2,fma")))

/// e^r 2^n for |r| <= ~ln2 / 2 and n in [-150, 128] (any int for NaN r;
/// n = -254 gives 0).
SMP_AVX2 inline __m256 expScaled8(__m256 r, __m256i n) {
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 e = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r),
                           _mm256_set1_ps(1.0f));
  // 2^n = 2^n1 2^n2 with n1, n2 in [-75, 64]: both normal floats, and a
  // subnormal result is rounded once, by the last product.
  __m256i n1 = _mm256_srai_epi32(n, 1), n2 = _mm256_sub_epi32(n, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 s1 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 s2 =
      _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(e, s1), s2);
}

/// exp(x + c) for |c| <= ~ulp(x) / 2 (c = 0: exp(x)), reduced in float:
/// x - n ln2 is exact with FMA and ln2 split in two, c is added to r.
SMP_AVX2 inline __m256 exp8(__m256 x, __m256 c = _mm256_setzero_ps()) {
  // Below -104 the result is 0: those lanes compute e^0 2^-127 2^-127 = 0
  // exactly (a product that underflows into the subnormals costs a
  // microcode assist; masked -inf logits are common). The min returns its
  // second operand when either is NaN: NaN stays.
  __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ);
  __m256 huge = _mm256_cmp_ps(x, _mm256_set1_ps(88.8f), _CMP_GT_OQ);
  x = _mm256_andnot_ps(tiny, _mm256_min_ps(_mm256_set1_ps(88.8f), x));
  c = _mm256_andnot_ps(_mm256_or_ps(tiny, huge), c);
  __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_add_ps(_mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r), c);
  n = _mm256_blendv_ps(n, _mm256_set1_ps(-254.0f), tiny);
  return expScaled8(r, _mm256_cvtps_epi32(n));
}

/// exp(x - shift) of the exact difference: the float difference d and its
/// rounding error (Knuth's TwoSum) go to exp8 as x and c.
SMP_AVX2 inline __m256 expShifted8(__m256 x, __m256 shift) {
  __m256 negShift = _mm256_sub_ps(_mm256_setzero_ps(), shift);
  __m256 d = _mm256_add_ps(x, negShift);
  __m256 bv = _mm256_sub_ps(d, x);
  __m256 err = _mm256_add_ps(_mm256_sub_ps(x, _mm256_sub_ps(d, bv)),
                             _mm256_sub_ps(negShift, bv));
  return exp8(d, err);
}

/// exp of an argument held in double (lanes 0-3 in lo, 4-7 in hi): used
/// where the argument is itself computed (x - max, the GELU polynomial) so
/// that its rounding to float does not cost |argument| ulps.
SMP_AVX2 inline __m256d reduce4(__m256d a, __m256d &r) {
  const __m256d bottom = _mm256_set1_pd(-104.0);
  __m256d tiny = _mm256_cmp_pd(a, bottom, _CMP_LT_OQ);
  a = _mm256_andnot_pd(tiny, _mm256_min_pd(_mm256_set1_pd(88.8), a));
  __m256d n =
      _mm256_round_pd(_mm256_mul_pd(a, _mm256_set1_pd(1.4426950408889634)),
                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(0.6931471805599453), a);
  return _mm256_blendv_pd(n, _mm256_set1_pd(-254.0), tiny);
}

SMP_AVX2 inline __m256 expd8(__m256d lo, __m256d hi) {
  __m256d rlo, rhi;
  __m256d nlo = reduce4(lo, rlo), nhi = reduce4(hi, rhi);
  __m256 r = _mm256_set_m128(_mm256_cvtpd_ps(rhi), _mm256_cvtpd_ps(rlo));
  __m256i n =
      _mm256_set_m128i(_mm256_cvtpd_epi32(nhi), _mm256_cvtpd_epi32(nlo));
  return expScaled8(r, n);
}

SMP_AVX2 inline __m256 tanh8(__m256 x) {
  const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
  __m256 ax = _mm256_andnot_ps(sign, x);
  // |x| < 0.625: x + x^3 P(x^2) (Cephes tanhf).
  __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  // Else sign(x) (1 - 2 / (e^2|x| + 1)); NaN takes this branch.
  __m256 e = exp8(_mm256_add_ps(ax, ax));
  __m256 large = _mm256_sub_ps(
      one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  __m256 isSmall = _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ);
  __m256 t = _mm256_blendv_ps(large, small, isSmall);
  return _mm256_or_ps(_mm256_andnot_ps(sign, t), _mm256_and_ps(sign, x));
}

/// x sigmoid(a) = x / (1 + e^-a), given e = exp(-|a|) and the lanes where
/// a < 0, computed as x / (1 + e) or x e / (1 + e) so that nothing
/// overflows and the result underflows gradually.
SMP_AVX2 inline __m256 timesSigmoid8(__m256 x, __m256 e, __m256 negative) {
  __m256 num = _mm256_blendv_ps(x, _mm256_mul_ps(x, e), negative);
  return _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

SMP_AVX2 inline __m256 negAbs8(__m256 x) {
  return _mm256_or_ps(x, _mm256_set1_ps(-0.0f));
}

SMP_AVX2 inline __m256 isNegative8(__m256 x) {
  return _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
}

/// -|2u|, 2u = 2 sqrt(2/pi) (x + 0.044715 x^3), in double.
SMP_AVX2 inline __m256d geluArg4(__m256d x) {
  const __m256d signBit = _mm256_set1_pd(-0.0);
  __m256d a = _mm256_fmadd_pd(
      _mm256_mul_pd(_mm256_set1_pd(2.0 * kSqrt2OverPiD * kGeluCubicD), x),
      _mm256_mul_pd(x, x),
      _mm256_mul_pd(_mm256_set1_pd(2.0 * kSqrt2OverPiD), x));
  return _mm256_or_pd(a, signBit);
}

/// 0.5 x (1 + tanh u) = x sigmoid(2u); 2u has the sign of x.
SMP_AVX2 inline __m256 geluTanh8(__m256 x) {
  __m256 e = expd8(geluArg4(_mm256_cvtps_pd(_mm256_castps256_ps128(x))),
                   geluArg4(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  return timesSigmoid8(x, e, isNegative8(x));
}

SMP_AVX2 inline __m256 apply8(VecOp op, __m256 x) {
  switch (op) {
  case VecOp::Exp:
    return exp8(x);
  case VecOp::Tanh:
    return tanh8(x);
  case VecOp::Sigmoid:
    return timesSigmoid8(_mm256_set1_ps(1.0f), exp8(negAbs8(x)),
                         isNegative8(x));
  case VecOp::Silu:
    return timesSigmoid8(x, exp8(negAbs8(x)), isNegative8(x));
  case VecOp::GeluTanh:
    return geluTanh8(x);
  }
  return x;
}

template <VecOp Op>
SMP_AVX2 void mapAvx2Op(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, apply8(Op, _mm256_loadu_ps(x + i)));
  if (i < n) { // the tail through a full vector: same result as in the body
    float buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::memcpy(buf, x + i, sizeof(float) * static_cast<size_t>(n - i));
    _mm256_storeu_ps(buf, apply8(Op, _mm256_loadu_ps(buf)));
    std::memcpy(y + i, buf, sizeof(float) * static_cast<size_t>(n - i));
  }
}

SMP_AVX2 void mapAvx2(VecOp op, const float *x, float *y, int64_t n) {
  switch (op) {
  case VecOp::Exp:
    return mapAvx2Op<VecOp::Exp>(x, y, n);
  case VecOp::Tanh:
    return mapAvx2Op<VecOp::Tanh>(x, y, n);
  case VecOp::Sigmoid:
    return mapAvx2Op<VecOp::Sigmoid>(x, y, n);
  case VecOp::Silu:
    return mapAvx2Op<VecOp::Silu>(x, y, n);
  case VecOp::GeluTanh:
    return mapAvx2Op<VecOp::GeluTanh>(x, y, n);
  }
}

/// dy (s + x 2u' e / (1 + e)^2), s = sigmoid(2u), e = e^-|2u|.
SMP_AVX2 inline __m256 geluTanhGrad8(__m256 x, __m256 dy) {
  __m256 e = expd8(geluArg4(_mm256_cvtps_pd(_mm256_castps256_ps128(x))),
                   geluArg4(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 r = _mm256_div_ps(one, _mm256_add_ps(one, e));
  __m256 s = _mm256_blendv_ps(r, _mm256_mul_ps(e, r), isNegative8(x));
  __m256 x2 = _mm256_mul_ps(x, x);
  __m256 du = _mm256_fmadd_ps(
      _mm256_set1_ps(static_cast<float>(6.0 * kSqrt2OverPiD * kGeluCubicD)),
      x2, _mm256_set1_ps(static_cast<float>(2.0 * kSqrt2OverPiD)));
  __m256 q = _mm256_mul_ps(_mm256_mul_ps(e, r), r);
  return _mm256_mul_ps(dy, _mm256_fmadd_ps(_mm256_mul_ps(x, du), q, s));
}

SMP_AVX2 void geluTanhGradAvx2(const float *x, const float *dy, float *dx,
                               int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dx + i, geluTanhGrad8(_mm256_loadu_ps(x + i),
                                           _mm256_loadu_ps(dy + i)));
  if (i < n) {
    float bx[8] = {0, 0, 0, 0, 0, 0, 0, 0}, bg[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t left = sizeof(float) * static_cast<size_t>(n - i);
    std::memcpy(bx, x + i, left);
    std::memcpy(bg, dy + i, left);
    _mm256_storeu_ps(bx, geluTanhGrad8(_mm256_loadu_ps(bx),
                                       _mm256_loadu_ps(bg)));
    std::memcpy(dx + i, bx, left);
  }
}

SMP_AVX2 float maxAvx2(const float *x, int64_t n) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 m0 = ninf, m1 = ninf;
  int64_t i = 0;
  // max(v, m) returns m when v is NaN: NaNs are skipped.
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
  }
  for (; i + 8 <= n; i += 8)
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
  m0 = _mm256_max_ps(m0, m1);
  float lanes[8];
  _mm256_storeu_ps(lanes, m0);
  float m = -std::numeric_limits<float>::infinity();
  for (float v : lanes)
    m = v > m ? v : m;
  for (; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}

SMP_AVX2 inline __m256d sumTo4(__m256 v) {
  return _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)),
                       _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

SMP_AVX2 double expSumAvx2(const float *x, float *y, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  // exp(-inf - shift) = 0 for a finite shift: blocks of masked logits are
  // stored as zeros without computing them.
  const bool skipMasked = std::isfinite(shift);
  __m256d acc0 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    if (skipMasked &&
        (_mm256_movemask_ps(_mm256_cmp_ps(v0, ninf, _CMP_EQ_OQ)) &
         _mm256_movemask_ps(_mm256_cmp_ps(v1, ninf, _CMP_EQ_OQ))) == 0xff) {
      _mm256_storeu_ps(y + i, _mm256_setzero_ps());
      _mm256_storeu_ps(y + i + 8, _mm256_setzero_ps());
      continue;
    }
    __m256 e0 = expShifted8(v0, s), e1 = expShifted8(v1, s);
    _mm256_storeu_ps(y + i, e0);
    _mm256_storeu_ps(y + i + 8, e1);
    acc0 = _mm256_add_pd(acc0, _mm256_add_pd(sumTo4(e0), sumTo4(e1)));
  }
  if (i < n) { // up to 15 left: through full vectors
    float buf[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    int64_t left = n - i;
    std::memcpy(buf, x + i, sizeof(float) * static_cast<size_t>(left));
    for (int64_t k = 0; k < 2 && 8 * k < left; ++k)
      _mm256_storeu_ps(buf + 8 * k,
                       expShifted8(_mm256_loadu_ps(buf + 8 * k), s));
    std::memcpy(y + i, buf, sizeof(float) * static_cast<size_t>(left));
    double t = 0;
    for (int64_t k = 0; k < left; ++k)
      t += static_cast<double>(buf[k]);
    acc0 = _mm256_add_pd(acc0, _mm256_set_pd(0, 0, 0, t));
  }
  double lanes[4];
  _mm256_storeu_pd(lanes, acc0);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

SMP_AVX2 void scaleAvx2(const float *x, float *y, int64_t n, float s,
                        bool stream) {
  const __m256 v = _mm256_set1_ps(s);
  int64_t i = 0;
  if (stream) {
    for (; i < n && (reinterpret_cast<uintptr_t>(y + i) & 31) != 0; ++i)
      y[i] = x[i] * s;
    for (; i + 8 <= n; i += 8)
      _mm256_stream_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), v));
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), v));
  for (; i < n; ++i)
    y[i] = x[i] * s;
}

bool cpuHasAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
bool cpuHasAvx2() { return false; }
#endif

/// SMP_CPU_SIMD=off runs the plain C++ paths a CPU without AVX2/FMA takes,
/// so a machine that has them can test those paths too.
bool simdAllowedByEnvironment() {
  const char *v = std::getenv("SMP_CPU_SIMD");
  return !v || (std::strcmp(v, "off") != 0 && std::strcmp(v, "0") != 0);
}

std::atomic<bool> &simdEnabled() {
  static std::atomic<bool> enabled{cpuHasAvx2() && simdAllowedByEnvironment()};
  return enabled;
}

} // namespace

bool vecSimdActive() { return simdEnabled().load(std::memory_order_relaxed); }

void vecUseSimd(bool enable) {
  simdEnabled().store(enable && cpuHasAvx2(), std::memory_order_relaxed);
}

void vecMap(VecOp op, const float *x, float *y, int64_t n) {
#ifdef SMP_VEC_X86
  if (vecSimdActive())
    return mapAvx2(op, x, y, n);
#endif
  mapScalar(op, x, y, n);
}

double geluTanhDerivative(double x) {
  // d/dx [x sigmoid(2u)] = s + 2 x u' s (1 - s), s (1 - s) = e / (1 + e)^2
  // with e = e^-|2u|.
  double a = 2.0 * kSqrt2OverPiD * (x + kGeluCubicD * x * x * x);
  double e = std::exp(-std::fabs(a)), r = 1.0 / (1.0 + e);
  double s = a < 0 ? e * r : r;
  double du = 2.0 * kSqrt2OverPiD * (1.0 + 3.0 * kGeluCubicD * x * x);
  return s + x * du * e * r * r;
}

void vecGeluTanhGrad(const float *x, const float *dy, float *dx, int64_t n) {
#ifdef SMP_VEC_X86
  if (vecSimdActive())
    return geluTanhGradAvx2(x, dy, dx, n);
#endif
  for (int64_t i = 0; i < n; ++i)
    dx[i] = geluTanhGradScalar(x[i], dy[i]);
}

float vecMax(const float *x, int64_t n) {
#ifdef SMP_VEC_X86
  if (vecSimdActive())
    return maxAvx2(x, n);
#endif
  return maxScalar(x, n);
}

double vecExpSum(const float *x, float *y, int64_t n, float shift) {
#ifdef SMP_VEC_X86
  if (vecSimdActive())
    return expSumAvx2(x, y, n, shift);
#endif
  return expSumScalar(x, y, n, shift);
}

void vecScale(const float *x, float *y, int64_t n, float s, bool stream) {
#ifdef SMP_VEC_X86
  if (vecSimdActive())
    return scaleAvx2(x, y, n, s, stream);
#endif
  (void)stream;
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * s;
}

} // namespace smp::kernels::cpu::detail

namespace smp::kernels::cpu {
const char *simdPath() {
  return detail::vecSimdActive() ? "avx2+fma" : "plain C++";
}
} // namespace smp::kernels::cpu
