//===- VecMathTest.cpp - vectorised f32 math and streamed outputs ---------===//
//
// The VecMath functions (kernels/cpu/VecMath.h, private to the kernels) on
// both paths, AVX2 (where the CPU has it) and the C library fallback, against
// long double references over a sweep of the floats; the AVX2 GEMM for
// small products against OpenBLAS and double; then large
// outputs, which the kernels write with streaming stores, against the same
// ops on slices small enough not to be streamed.
//
//===----------------------------------------------------------------------===//

#include "VecMath.h"
#include "TestUtil.h"

#include <cfloat>
#include <cstring>

namespace smp::kernels::cpu::test {
namespace {

using detail::VecOp;

long double refOp(VecOp op, long double x) {
  const long double k =
      std::sqrt(2.0L / 3.14159265358979323846264338327950288L);
  switch (op) {
  case VecOp::Exp:
    return std::exp(x);
  case VecOp::Tanh:
    return std::tanh(x);
  case VecOp::Sigmoid:
    return 1 / (1 + std::exp(-x));
  case VecOp::Silu:
    return x / (1 + std::exp(-x));
  case VecOp::GeluTanh: // 0.5 x (1 + tanh u) = x / (1 + e^-2u), no cancellation
    return x / (1 + std::exp(-2 * k * (x + 0.044715L * x * x * x)));
  }
  return 0;
}

/// |got - want| in units of the last place of want rounded to float; results
/// below FLT_MIN (subnormal) count in units of FLT_MIN instead.
double ulpError(float got, long double want) {
  float w = static_cast<float>(want);
  if (std::isnan(w))
    return std::isnan(got) ? 0 : INFINITY;
  if (std::isinf(w))
    return got == w ? 0 : INFINITY;
  long double aw = std::fabs(want);
  long double ulp = aw < FLT_MIN
                        ? FLT_MIN
                        : std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  return static_cast<double>(std::fabs(got - want) / ulp);
}

/// Every 4099th float (about a million) of both signs with magnitude up to
/// `hi`.
std::vector<float> sweep(float hi) {
  std::vector<float> xs;
  for (uint32_t b = 0; b < 0x7f800000u; b += 4099) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    if (f > hi)
      break;
    xs.push_back(f);
    xs.push_back(-f);
  }
  return xs;
}

struct Path {
  bool simd;
  const char *name;
};

/// The fallback always; AVX2 where the CPU has it. Restores the default.
template <class F> void forEachPath(F &&f) {
  detail::vecUseSimd(true);
  bool haveSimd = detail::vecSimdActive();
  for (Path p : {Path{false, "fallback"}, Path{true, "avx2"}}) {
    if (p.simd && !haveSimd)
      continue;
    SCOPED_TRACE(p.name);
    detail::vecUseSimd(p.simd);
    f();
  }
  detail::vecUseSimd(true);
}

TEST(VecMath, WithinAFewUlpOfLongDouble) {
  struct Case {
    VecOp op;
    const char *name;
    float hi;      // sweep range
    double maxUlp; // bound for both paths
  };
  // Ranges cover the limits: exp over/underflows, tanh and sigmoid
  // saturate. silu and the GELU stop where e^x (e^2u) becomes subnormal and
  // loses digits: below that their results are under 1e-36 (the C library
  // fallback does no better there).
  const Case cases[] = {
      {VecOp::Exp, "exp", 110, 1.5},           {VecOp::Tanh, "tanh", 12, 3},
      {VecOp::Sigmoid, "sigmoid", 110, 3},     {VecOp::Silu, "silu", 87, 4},
      {VecOp::GeluTanh, "gelu_tanh", 9.9f, 4},
  };
  forEachPath([&] {
    for (const Case &c : cases) {
      SCOPED_TRACE(c.name);
      std::vector<float> xs = sweep(c.hi), ys(xs.size());
      detail::vecMap(c.op, xs.data(), ys.data(),
                     static_cast<int64_t>(xs.size()));
      double worst = 0;
      float at = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        double e = ulpError(ys[i], refOp(c.op, xs[i]));
        if (!(e <= worst)) {
          worst = e;
          at = xs[i];
        }
      }
      EXPECT_LE(worst, c.maxUlp) << "at x = " << at;
    }
  });
}

TEST(VecMath, SpecialValues) {
  const float inf = INFINITY, nan = NAN;
  const std::vector<float> x = {nan, inf, -inf, 0.0f, -0.0f, 200, -200, 1e-30f};
  forEachPath([&] {
    std::vector<float> y(x.size());
    auto run = [&](VecOp op) {
      detail::vecMap(op, x.data(), y.data(), static_cast<int64_t>(x.size()));
      EXPECT_TRUE(std::isnan(y[0]));
    };
    run(VecOp::Exp);
    EXPECT_EQ(y[1], inf);
    EXPECT_EQ(y[2], 0.0f);
    EXPECT_EQ(y[3], 1.0f);
    EXPECT_EQ(y[5], inf);
    EXPECT_EQ(y[6], 0.0f);
    run(VecOp::Tanh);
    EXPECT_EQ(y[1], 1.0f);
    EXPECT_EQ(y[2], -1.0f);
    EXPECT_TRUE(y[4] == 0.0f && std::signbit(y[4])); // tanh(-0) = -0
    EXPECT_EQ(y[7], 1e-30f);
    run(VecOp::Sigmoid);
    EXPECT_EQ(y[1], 1.0f);
    EXPECT_EQ(y[2], 0.0f);
    EXPECT_EQ(y[3], 0.5f);
    EXPECT_EQ(y[6], 0.0f);
    run(VecOp::Silu);
    EXPECT_EQ(y[1], inf);
    EXPECT_EQ(y[5], 200.0f);
    EXPECT_EQ(y[6], 0.0f);
    run(VecOp::GeluTanh);
    EXPECT_EQ(y[1], inf);
    EXPECT_EQ(y[3], 0.0f);
    EXPECT_EQ(y[5], 200.0f);
    EXPECT_EQ(y[6], 0.0f);
  });
}

TEST(VecMath, SameResultAtAnyPositionAndLength) {
  // Body and tail lanes compute alike, so a loop split differently over
  // threads gives the same numbers.
  std::vector<float> pattern = {-3.7f, 0.3f, 5.1f, -0.01f, 1.7f};
  forEachPath([&] {
    for (VecOp op : {VecOp::Exp, VecOp::Tanh, VecOp::Sigmoid, VecOp::Silu,
                     VecOp::GeluTanh}) {
      std::vector<float> x(37), full(37);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = pattern[i % pattern.size()];
      detail::vecMap(op, x.data(), full.data(), 37);
      for (int64_t start = 0; start < 9; ++start)
        for (int64_t len = 1; start + len <= 37; len += 5) {
          std::vector<float> part(static_cast<size_t>(len));
          detail::vecMap(op, x.data() + start, part.data(), len);
          for (int64_t i = 0; i < len; ++i)
            ASSERT_EQ(part[i], full[start + i]);
        }
    }
  });
}

TEST(VecMath, ExpSumMaxAndScale) {
  forEachPath([&] {
    // exp(x - shift) of the exact difference, every length up to 40.
    for (int64_t n = 0; n <= 40; ++n) {
      std::vector<float> x(static_cast<size_t>(n)), y(x.size());
      for (int64_t i = 0; i < n; ++i)
        x[i] = 37.3f - 2.9f * static_cast<float>(i);
      float m = detail::vecMax(x.data(), n);
      EXPECT_EQ(m, n ? 37.3f : -INFINITY);
      double sum = detail::vecExpSum(x.data(), y.data(), n, m), want = 0;
      for (int64_t i = 0; i < n; ++i) {
        long double e = std::exp(static_cast<long double>(x[i]) - m);
        EXPECT_LE(ulpError(y[i], e), 1.5) << "n " << n << " i " << i;
        want += y[i];
      }
      EXPECT_NEAR(sum, want, 1e-15 * want);
    }
    // A causal-mask row: -inf blocks are exact zeros, NaN propagates, and a
    // row of -inf only (shift -inf) is NaN as in PyTorch.
    std::vector<float> row(100, -INFINITY), out(100);
    row[0] = 1;
    row[1] = 2;
    EXPECT_EQ(detail::vecMax(row.data(), 100), 2.0f);
    double s = detail::vecExpSum(row.data(), out.data(), 100, 2);
    EXPECT_NEAR(s, 1 + std::exp(-1.0), 1e-7);
    for (int i = 2; i < 100; ++i)
      ASSERT_EQ(out[i], 0.0f);
    row[50] = NAN;
    EXPECT_EQ(detail::vecMax(row.data(), 100), 2.0f); // NaN ignored
    EXPECT_TRUE(std::isnan(detail::vecExpSum(row.data(), out.data(), 100, 2)));
    std::vector<float> masked(20, -INFINITY);
    EXPECT_EQ(detail::vecMax(masked.data(), 20), -INFINITY);
    EXPECT_TRUE(std::isnan(
        detail::vecExpSum(masked.data(), out.data(), 20, -INFINITY)));
    // Scale, plain and streamed, aligned or not.
    std::vector<float> a(67), b(67), c(67);
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = 0.1f * static_cast<float>(i) - 2;
    for (int64_t off : {0, 1, 3}) {
      detail::vecScale(a.data() + off, b.data() + off, 67 - off, 0.37f);
      detail::vecScale(a.data() + off, c.data() + off, 67 - off, 0.37f, true);
      for (int64_t i = off; i < 67; ++i) {
        ASSERT_EQ(b[i], a[i] * 0.37f);
        ASSERT_EQ(c[i], b[i]);
      }
    }
  });
}

//===----------------------------------------------------------------------===//
// The AVX2 GEMM for small packed B (Gemm.cpp), against OpenBLAS and double
//===----------------------------------------------------------------------===//

TEST(SmallGemm, MatchesDoubleReferenceOnBothPaths) {
  struct Case {
    int64_t m, k, n;
    bool tb;
  };
  // Row and column tails (m % 6, n % 16), k = 1, transposed rhs, the two
  // attention shapes, and short k with n in several packed blocks.
  const Case cases[] = {{1000, 64, 1000, false}, {130, 1024, 64, false},
                        {50, 7, 333, true},      {31, 1, 17, false},
                        {24, 128, 100, true},    {40, 16, 9000, false}};
  unsigned seed = 900;
  for (const Case &c : cases) {
    SCOPED_TRACE(std::to_string(c.m) + "x" + std::to_string(c.k) + "x" +
                 std::to_string(c.n) + (c.tb ? " tb" : ""));
    Host a = random(DType::F32, {c.m, c.k}, -1, 1, seed++);
    Host b = random(DType::F32,
                    c.tb ? std::vector<int64_t>{c.n, c.k}
                         : std::vector<int64_t>{c.k, c.n},
                    -1, 1, seed++);
    std::vector<double> want(static_cast<size_t>(c.m * c.n));
    const float *pa = a.as<float>(), *pb = b.as<float>();
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < c.k; ++p)
          acc += double(pa[i * c.k + p]) *
                 double(c.tb ? pb[j * c.k + p] : pb[p * c.n + j]);
        want[i * c.n + j] = acc;
      }
    forEachPath([&] {
      Host o(DType::F32, {c.m, c.n});
      ASSERT_OK(matmul(a, b, o, false, c.tb));
      // |error| <= k ulp of the sum of |terms| (at most k): 1e-5 k.
      expectNear(o.values(), want, 0, 1e-6 * double(c.k) + 1e-6);
    });
  }
}

//===----------------------------------------------------------------------===//
// Streamed outputs (at least 32 MiB) equal the unstreamed ones
//===----------------------------------------------------------------------===//

/// Tensor [33, 256, 1024] f32 (34.6 MB, streamed) and its slices of
/// [1, 256, 1024] (not streamed): the op on the whole equals the op on each
/// slice, bit for bit.
TEST(Streaming, LargeOutputsMatchSlices) {
  const int64_t B = 33, R = 256, N = 1024, slice = R * N;
  Host x = random(DType::F32, {B, R, N}, -6, 6, 7);
  float *xs = x.as<float>();
  for (int64_t r = 0; r < B * R; ++r) // causal-mask-like -inf tails
    for (int64_t j = (r % R) * 4 + 1; j < N; ++j)
      xs[r * N + j] = (r % 3 == 0) ? -INFINITY : xs[r * N + j];
  Host mask(DType::Bool, {R, N});
  for (int64_t i = 0; i < slice; ++i)
    mask.as<uint8_t>()[i] = (i * 7919) % 5 < 2;
  Host scale = make(DType::F32, {}, {0.125});
  Host fill = make(DType::F32, {}, {-1e4});
  Host whole(DType::F32, {B, R, N}), part(DType::F32, {1, R, N});

  auto sliceOf = [&](const Host &h, int64_t b) {
    TensorRef t = h.ref;
    t.data =
        const_cast<float *>(static_cast<const float *>(h.ref.data)) + b * slice;
    t.shape = {1, R, N};
    return t;
  };
  auto check = [&](const char *what, auto op) {
    SCOPED_TRACE(what);
    ASSERT_OK(op(x.ref, whole.ref));
    for (int64_t b = 0; b < B; b += 8) {
      ASSERT_OK(op(sliceOf(x, b), part.ref));
      ASSERT_EQ(0, std::memcmp(part.as<float>(), whole.as<float>() + b * slice,
                               slice * sizeof(float)))
          << "slice " << b;
    }
  };
  check("mul", [&](const TensorRef &in, const TensorRef &out) {
    return binary(BinaryOp::Mul, in, scale.ref, out);
  });
  check("add", [&](const TensorRef &in, const TensorRef &out) {
    return binary(BinaryOp::Add, in, in, out);
  });
  check("where", [&](const TensorRef &in, const TensorRef &out) {
    return where(mask.ref, fill.ref, in, out);
  });
  check("gelu", [&](const TensorRef &in, const TensorRef &out) {
    return gelu(in, true, out);
  });
  check("softmax", [&](const TensorRef &in, const TensorRef &out) {
    return softmax(in, -1, out);
  });
  // And the streamed softmax against the double reference on a few rows.
  for (int64_t r : {int64_t(0), int64_t(1), int64_t(4000), B * R - 1}) {
    const float *xr = xs + r * N;
    double m = -INFINITY, sum = 0;
    for (int64_t j = 0; j < N; ++j)
      m = std::max(m, double(xr[j]));
    for (int64_t j = 0; j < N; ++j)
      sum += std::exp(double(xr[j]) - m);
    for (int64_t j = 0; j < N; ++j) {
      double want = std::exp(double(xr[j]) - m) / sum;
      ASSERT_NEAR(whole.as<float>()[r * N + j], want, 1e-6 * want + 1e-12);
    }
  }
}

} // namespace
} // namespace smp::kernels::cpu::test
