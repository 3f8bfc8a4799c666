//===- TrainingTest.cpp - gradient and optimizer kernels -------------------===//
//
// The gradient kernels against long double references of the textbook
// derivatives, and the norm gradients also against central differences of
// the forward kernels in f64 (an independent path: the forward code). Both
// our AVX2 code and the C library fallback run. Thread-count independence is
// in ThreadsTest.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "VecMath.h"
#include "smp/kernels/cpu/Training.h"

#include <cmath>

namespace smp::kernels::cpu::test {
namespace {

using LD = long double;
const LD kPi = 3.14159265358979323846264338327950288L;

/// The AVX2 code and the fallback (where the CPU has AVX2).
template <class F> void bothPaths(F &&f) {
  detail::vecUseSimd(true);
  bool simd = detail::vecSimdActive();
  for (bool on : {false, true}) {
    if (on && !simd)
      continue;
    SCOPED_TRACE(on ? "avx2" : "fallback");
    detail::vecUseSimd(on);
    f();
  }
  detail::vecUseSimd(true);
}

/// gelu'(x): the two terms of the derivative, whose magnitudes bound the
/// rounding error (they cancel near x = -0.75).
struct GeluDeriv {
  LD value, scale;
};
GeluDeriv geluDeriv(LD x, bool tanhApprox) {
  if (!tanhApprox) {
    LD cdf = 0.5L * std::erfc(-x / std::sqrt(2.0L));
    LD pdf = std::exp(-0.5L * x * x) / std::sqrt(2 * kPi);
    return {cdf + x * pdf, std::fabs(cdf) + std::fabs(x * pdf)};
  }
  LD k = std::sqrt(2 / kPi), c = 0.044715L;
  // 0.5 (1 + tanh u) = sigmoid(2u) and 1 - tanh^2 u = 4 sigmoid(2u)
  // sigmoid(-2u): written so, nothing cancels for large |x|.
  LD u = k * (x + c * x * x * x);
  LD sp = 1 / (1 + std::exp(-2 * u)), sn = 1 / (1 + std::exp(2 * u));
  LD a = sp, b = 2 * x * sp * sn * k * (1 + 3 * c * x * x);
  return {a + b, std::fabs(a) + std::fabs(b)};
}

TEST(GeluGrad, MatchesTheDerivativeInLongDouble) {
  const int64_t n = 20011; // not a multiple of 8: the vector tail runs
  for (DType t : {DType::F32, DType::BF16, DType::F64})
    for (bool tanhApprox : {true, false}) {
      SCOPED_TRACE(std::string(smp::base::dtypeName(t)) +
                   (tanhApprox ? " tanh" : " erf"));
      Host x(t, {n}), dy = random(t, {n}, -2, 2, 3), dx(t, {n});
      for (int64_t i = 0; i < n; ++i)
        x.set(i, -12.0 + 24.0 * static_cast<double>(i) / (n - 1));
      bothPaths([&] {
        ASSERT_OK(geluGrad(x, dy, tanhApprox, dx));
        // f32: a few ulp of the larger term (f64: e^-2u is as exact as 2u,
        // |2u| 1e-16); bf16: the output's rounding;
        // results below the smallest normal number are flushed.
        double rel = t == DType::F32 ? 1e-6 : t == DType::F64 ? 1e-12 : 8e-3;
        double tiny = t == DType::F64 ? 1e-300 : 1e-37;
        for (int64_t i = 0; i < n; ++i) {
          GeluDeriv d = geluDeriv(x.get(i), tanhApprox);
          LD want = d.value * dy.get(i);
          double tol =
              rel * static_cast<double>(d.scale * std::fabs(dy.get(i))) +
              tiny;
          ASSERT_LE(std::fabs(static_cast<double>(dx.get(i) - want)), tol)
              << "x = " << x.get(i);
        }
      });
    }
}

TEST(GeluGrad, SpecialValues) {
  // Saturated inputs give the limits exactly; NaN propagates (infinities
  // give NaN, as PyTorch's formula does).
  Host x = make(DType::F32, {4}, {NAN, 200.0, 0.0, -200.0});
  Host dy = make(DType::F32, {4}, {1, 1, 2, 1}), dx(DType::F32, {4});
  bothPaths([&] {
    ASSERT_OK(geluGrad(x, dy, true, dx));
    EXPECT_TRUE(std::isnan(dx.get(0)));
    EXPECT_EQ(dx.get(1), 1.0);
    EXPECT_EQ(dx.get(2), 1.0); // 2 * gelu'(0) = 2 * 0.5
    EXPECT_EQ(dx.get(3), 0.0);
  });
}

/// sum(dy * f(x)) in f64, for central differences.
double dot(const Host &a, const Host &b) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    s += a.get(i) * b.get(i);
  return s;
}

/// Central difference of sum(dy * f()) at element i of `p` (f64).
template <class F>
double centralDiff(Host &p, int64_t i, const Host &dy, F &&forward) {
  const double h = 1e-5, v = p.get(i);
  p.set(i, v + h);
  double up = dot(dy, forward());
  p.set(i, v - h);
  double down = dot(dy, forward());
  p.set(i, v);
  return (up - down) / (2 * h);
}

TEST(NormGrad, LayerNormEqualsCentralDifferencesOfTheForward) {
  const std::vector<int64_t> shape = {5, 3, 8};
  for (std::vector<int64_t> sshape :
       std::vector<std::vector<int64_t>>{{3, 8}, {8}}) {
    Host x = random(DType::F64, shape, -2, 2, 1);
    Host dy = random(DType::F64, shape, -1, 1, 2);
    Host w = random(DType::F64, sshape, 0.5, 1.5, 3);
    Host b = random(DType::F64, sshape, -0.5, 0.5, 4);
    Host dx(DType::F64, shape), dw(DType::F64, sshape), db(DType::F64, sshape);
    ASSERT_OK(layerNormGrad(x, w, dy, 1, 1e-5f, dx, dw, db));
    auto forward = [&] {
      Host y(DType::F64, shape);
      EXPECT_OK(layerNorm(x, w, &b.ref, 1, 1e-5f, y));
      return y;
    };
    for (int64_t i = 0; i < x.numel(); i += 7)
      EXPECT_NEAR(dx.get(i), centralDiff(x, i, dy, forward), 1e-7) << i;
    for (int64_t i = 0; i < w.numel(); ++i) {
      EXPECT_NEAR(dw.get(i), centralDiff(w, i, dy, forward), 1e-7) << i;
      EXPECT_NEAR(db.get(i), centralDiff(b, i, dy, forward), 1e-7) << i;
    }
  }
}

TEST(NormGrad, RmsNormEqualsCentralDifferencesOfTheForward) {
  const std::vector<int64_t> shape = {6, 2, 16};
  Host x = random(DType::F64, shape, -2, 2, 5);
  Host dy = random(DType::F64, shape, -1, 1, 6);
  Host w = random(DType::F64, {16}, 0.5, 1.5, 7);
  Host dx(DType::F64, shape), dw(DType::F64, {16});
  ASSERT_OK(rmsNormGrad(x, w, dy, 1e-6f, dx, dw));
  auto forward = [&] {
    Host y(DType::F64, shape);
    EXPECT_OK(rmsNorm(x, w, 1e-6f, y));
    return y;
  };
  for (int64_t i = 0; i < x.numel(); i += 5)
    EXPECT_NEAR(dx.get(i), centralDiff(x, i, dy, forward), 1e-7) << i;
  for (int64_t i = 0; i < w.numel(); ++i)
    EXPECT_NEAR(dw.get(i), centralDiff(w, i, dy, forward), 1e-7) << i;
}

/// Many rows (several row blocks) in f32 against the long double formula.
TEST(NormGrad, LayerNormF32ManyRows) {
  const int64_t rows = 600, n = 96;
  Host x = random(DType::F32, {rows, n}, -3, 3, 8);
  Host dy = random(DType::F32, {rows, n}, -1, 1, 9);
  Host w = random(DType::F32, {n}, 0.5, 1.5, 10);
  Host dx(DType::F32, {rows, n}), dw(DType::F32, {n}), db(DType::F32, {n});
  ASSERT_OK(layerNormGrad(x, w, dy, -1, 1e-5f, dx, dw, db));
  std::vector<LD> wantW(n, 0), wantB(n, 0);
  std::vector<double> gotX, wantX;
  for (int64_t r = 0; r < rows; ++r) {
    LD mean = 0, var = 0, sumD = 0, sumDX = 0;
    for (int64_t j = 0; j < n; ++j)
      mean += x.get(r * n + j);
    mean /= n;
    for (int64_t j = 0; j < n; ++j)
      var += (x.get(r * n + j) - mean) * (x.get(r * n + j) - mean);
    LD rstd = 1 / std::sqrt(var / n + 1e-5L);
    for (int64_t j = 0; j < n; ++j) {
      LD xh = (x.get(r * n + j) - mean) * rstd, g = dy.get(r * n + j);
      sumD += g * w.get(j);
      sumDX += g * w.get(j) * xh;
      wantW[j] += g * xh;
      wantB[j] += g;
    }
    for (int64_t j = 0; j < n; ++j) {
      LD xh = (x.get(r * n + j) - mean) * rstd;
      wantX.push_back(static_cast<double>(
          rstd * (dy.get(r * n + j) * w.get(j) - sumD / n - xh * sumDX / n)));
      gotX.push_back(dx.get(r * n + j));
    }
  }
  expectNear(gotX, wantX, 1e-6, 1e-7);
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_NEAR(dw.get(j), static_cast<double>(wantW[j]), 1e-5) << j;
    EXPECT_NEAR(db.get(j), static_cast<double>(wantB[j]), 1e-5) << j;
  }
}

/// softmax(x) - onehot, scaled by the mean's 1 / counted; ignored rows 0.
/// Rows x classes large enough for the streamed output (32 MiB).
TEST(CrossEntropyGrad, MatchesSoftmaxMinusOneHot) {
  for (int64_t rows : {int64_t(37), int64_t(1040)}) {
    const int64_t classes = 8195;
    SCOPED_TRACE(rows);
    Host x = random(DType::F32, {rows, classes}, -8, 8, 11);
    for (int64_t c = 0; c < 100; ++c) // a masked block in row 1
      x.set(classes + 200 + c, -INFINITY);
    Host labels = random(DType::I64, {rows}, 0, classes, 12);
    labels.set(3, -100);
    Host dloss = make(DType::F32, {}, {0.5});
    Host dx(DType::F32, {rows, classes});
    bothPaths([&] {
      ASSERT_OK(crossEntropyGrad(x, labels, nullptr, dloss, -100,
                                 Reduction::Mean, dx));
      LD scale = 0.5L / (rows - 1);
      for (int64_t r = 0; r < rows; r += (rows > 100 ? 97 : 1)) {
        LD m = -INFINITY, sum = 0;
        for (int64_t c = 0; c < classes; ++c)
          m = std::max<LD>(m, x.get(r * classes + c));
        for (int64_t c = 0; c < classes; ++c)
          sum += std::exp(x.get(r * classes + c) - m);
        std::vector<double> got, want;
        for (int64_t c = 0; c < classes; ++c) {
          LD p = std::exp(x.get(r * classes + c) - m) / sum;
          LD v = labels.get(r) == -100
                     ? 0
                     : scale * (p - (c == labels.get(r) ? 1 : 0));
          got.push_back(dx.get(r * classes + c));
          want.push_back(static_cast<double>(v));
        }
        expectNear(got, want, 4e-6, 1e-12);
      }
    });
  }
}

/// cross_entropy_with_grad: the loss and the gradient of the two kernels,
/// bit for bit, also with the gradient written over the logits (the loss
/// is read first) and with a bad label refused.
TEST(CrossEntropyWithGrad, IsTheTwoKernelsInPlaceToo) {
  for (DType t : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(smp::base::dtypeName(t));
    const int64_t rows = 6, classes = 300, stride = 304;
    Host x = random(t, {rows, stride}, -5, 5, 21);
    Host labels = random(DType::I64, {rows}, 0, classes, 22);
    labels.set(2, -100);
    Host g = make(DType::F32, {}, {0.5});
    Host loss(DType::F32, {}), dx(t, {rows, stride});
    ASSERT_OK(
        crossEntropy(x, labels, -100, Reduction::Mean, loss, nullptr, classes));
    ASSERT_OK(crossEntropyGrad(x, labels, nullptr, g, -100, Reduction::Mean, dx,
                               classes));
    Host fusedLoss(DType::F32, {}), over = x;
    ASSERT_OK(crossEntropyWithGrad(over, labels, nullptr, g, -100,
                                   Reduction::Mean, fusedLoss, over, classes));
    EXPECT_EQ(fusedLoss.values(), loss.values());
    EXPECT_EQ(over.values(), dx.values());
    labels.set(0, classes);
    Status bad = crossEntropyWithGrad(x, labels, nullptr, g, -100,
                                      Reduction::Mean, fusedLoss, dx, classes);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error.find("label 300 at position 0 is outside [0, 300)"),
              std::string::npos)
        << bad.error;
  }
}

/// Repeated and negative indices on the middle axis of a 3-d table.
TEST(GatherGrad, SumsEveryPositionThatGatheredARow) {
  const int64_t outer = 3, dim = 11, inner = 5, k = 40;
  Host idx = random(DType::I64, {k}, -dim, dim, 13);
  idx.set(0, 4);
  idx.set(1, 4);
  idx.set(2, -7); // row 4 again
  Host dy = random(DType::F32, {outer, k, inner}, -1, 1, 14);
  Host out(DType::F32, {outer, dim, inner});
  ASSERT_OK(gatherGrad(idx, dy, 1, out));
  std::vector<LD> want(outer * dim * inner, 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j) {
      int64_t d = static_cast<int64_t>(idx.get(j));
      d = d < 0 ? d + dim : d;
      for (int64_t i = 0; i < inner; ++i)
        want[(o * dim + d) * inner + i] += dy.get((o * k + j) * inner + i);
    }
  std::vector<double> w(want.begin(), want.end());
  expectNear(out.values(), w, 1e-6, 1e-7);
  idx.set(5, dim);
  EXPECT_FALSE(gatherGrad(idx, dy, 1, out).ok());
}

/// In place (the runtime's aliasing) gives the out-of-place bytes.
TEST(Optimizers, InPlaceEqualsOutOfPlace) {
  const int64_t n = 3001;
  Host p = random(DType::F32, {n}, -1, 1, 15), g = random(DType::F32, {n}, -1, 1, 16);
  Host m = random(DType::F32, {n}, -0.1, 0.1, 17);
  Host v = random(DType::F32, {n}, 0, 0.01, 18);
  AdamOptions ao;
  ao.weightDecay = 0.1;
  Host p2(p), m2(m), v2(v);
  Host po(DType::F32, {n}), mo(DType::F32, {n}), vo(DType::F32, {n});
  ASSERT_OK(adamUpdate(p, g, m, v, 1e-3, 3, ao, po, mo, vo));
  ASSERT_OK(adamUpdate(p2, g, m2, v2, 1e-3, 3, ao, p2, m2, v2));
  EXPECT_EQ(po.bytes, p2.bytes);
  EXPECT_EQ(mo.bytes, m2.bytes);
  EXPECT_EQ(vo.bytes, v2.bytes);
  // AdamW by hand at one element.
  double gi = g.get(7), mi = 0.9 * m.get(7) + 0.1 * gi,
         vi = 0.999 * v.get(7) + 0.001 * gi * gi;
  double pi = p.get(7) * (1 - 1e-3 * 0.1) -
              1e-3 / (1 - std::pow(0.9, 3)) * mi /
                  (std::sqrt(vi / (1 - std::pow(0.999, 3))) + 1e-8);
  EXPECT_NEAR(po.get(7), pi, 1e-7);

  SgdOptions so;
  so.momentum = 0.9;
  so.weightDecay = 0.01;
  so.nesterov = true;
  Host q(p), b(m), qo(DType::F32, {n}), bo(DType::F32, {n});
  ASSERT_OK(sgdUpdate(p, g, m, 0.1, 2, so, qo, bo));
  ASSERT_OK(sgdUpdate(q, g, b, 0.1, 2, so, q, b));
  EXPECT_EQ(qo.bytes, q.bytes);
  EXPECT_EQ(bo.bytes, b.bytes);
  double d = g.get(7) + 0.01 * p.get(7), buf = 0.9 * m.get(7) + d;
  EXPECT_NEAR(qo.get(7), p.get(7) - 0.1 * (d + 0.9 * buf), 1e-7);
  EXPECT_NEAR(bo.get(7), buf, 1e-7);
}

} // namespace
} // namespace smp::kernels::cpu::test
