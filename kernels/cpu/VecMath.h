//===- VecMath.h - Vectorised f32 math for the CPU kernels -------*- C++
//-*-===//
//
// exp, tanh, sigmoid, silu and the tanh GELU over contiguous f32 arrays, plus
// the two loops of a softmax row. On x86-64 CPUs with AVX2 and FMA (checked
// at run time, so the library still runs on any x86-64) they use 8-wide
// polynomial approximations; elsewhere they fall back to the C library.
//
// Accuracy of the AVX2 code, measured against double over every 7th float
// (VecMathTest checks a sparser sweep against long double with the bounds in
// brackets): exp 1.01 ulp [1.5] including the subnormal range,
// exp(x - shift) 1.15 ulp [1.5] (8M random pairs), tanh 1.31 [3], sigmoid
// 2.36 [3], silu 3.22
// [4] and the tanh GELU 3.18 ulp [4]; silu and the GELU where e^x (e^-2u) is
// a normal float (below, their results are under 1e-36 and lose digits as
// with the C library). The tanh GELU is evaluated as
// x sigmoid(2u) = x / (1 + e^-2u), u = sqrt(2/pi) (x + 0.044715 x^3) taken in
// double: that equals 0.5 x (1 + tanh u) but keeps the low digits of
// 1 + tanh u for negative x, which a float tanh loses (up to 100% relative
// error near x = -5, as in PyTorch's and the previous kernels' float GELU).
// NaN propagates; infinities give the limits. A given input gives the same
// output at any position in an array, so the results do not depend on how a
// loop is split over threads.
//
// Private to kernels/cpu.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CPU_VECMATH_H
#define SMP_KERNELS_CPU_VECMATH_H

#include <cmath>
#include <cstdint>

namespace smp::kernels::cpu::detail {

enum class VecOp : uint8_t { Exp, Tanh, Sigmoid, Silu, GeluTanh };

/// y[i] = op(x[i]) for i < n; y may equal x.
void vecMap(VecOp op, const float *x, float *y, int64_t n);

/// dx[i] = dy[i] * d/dx gelu_tanh(x[i]) (x sigmoid(2u) differentiated, so
/// no 1 + tanh u cancels for negative x); dx may equal x or dy.
void vecGeluTanhGrad(const float *x, const float *dy, float *dx, int64_t n);
/// The tanh GELU's derivative at x, in double (the same formula, for the
/// scalar paths of any float type).
double geluTanhDerivative(double x);

/// The largest x[i] ignoring NaNs; -inf when n == 0 or all are NaN.
float vecMax(const float *x, int64_t n);

/// y[i] = exp(x[i] - shift) of the exact difference; returns the sum of the
/// y[i] accumulated in double. y may equal x. With a finite shift, blocks of
/// -inf inputs (masked logits) are stored as zeros without computing them.
double vecExpSum(const float *x, float *y, int64_t n, float shift);

/// y[i] = x[i] * s; y may equal x. With stream, y is written with
/// non-temporal stores where aligned (see kStreamBytes in Common.h; the
/// caller fences).
void vecScale(const float *x, float *y, int64_t n, float s,
              bool stream = false);

/// One Adam/AdamW step, computed in double (VecOptim.cpp).
struct AdamStep {
  bool decoupled = true;  // AdamW: p *= decay; else L2: g += weightDecay p
  double decay = 1;       // 1 - lr weightDecay
  double weightDecay = 0;
  double oneMinusBeta1 = 0.1, beta2 = 0.999, oneMinusBeta2 = 0.001;
  double stepSize = 0;    // lr / (1 - beta1^t)
  double bc2Sqrt = 1;     // sqrt(1 - beta2^t)
  double epsilon = 1e-8;
};
/// The step of one element, in double: the reference the AVX2 loop
/// follows, and what other float types compute.
inline void adamElement(const AdamStep &s, double &p, double g, double &m,
                        double &v) {
  if (s.decoupled)
    p *= s.decay;
  else if (s.weightDecay != 0)
    g += s.weightDecay * p;
  m += s.oneMinusBeta1 * (g - m);
  v = v * s.beta2 + s.oneMinusBeta2 * g * g;
  p -= s.stepSize * m / (std::sqrt(v) / s.bc2Sqrt + s.epsilon);
}
/// f32 operands; each output may be its input (in place) or disjoint.
struct AdamArrays {
  const float *param, *grad, *expAvg, *expAvgSq;
  float *newParam, *newExpAvg, *newExpAvgSq;
  /// The arrays from element k on.
  AdamArrays at(int64_t k) const {
    return {param + k,    grad + k,      expAvg + k,      expAvgSq + k,
            newParam + k, newExpAvg + k, newExpAvgSq + k};
  }
};
/// The step over elements [0, n): the same bits on both paths (no FMA).
void vecAdam(const AdamStep &s, const AdamArrays &a, int64_t n);

/// True when the AVX2/FMA code runs (false on other CPUs or after
/// vecUseSimd(false)).
bool vecSimdActive();
/// Tests: false forces the C library fallback, true restores the default.
void vecUseSimd(bool enable);

} // namespace smp::kernels::cpu::detail

#endif // SMP_KERNELS_CPU_VECMATH_H
