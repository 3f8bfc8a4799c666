//===- ElementwiseTest.cpp - unary, binary, where, cast -------------------===//

#include "TestUtil.h"

#include <cstring>
#include <functional>
#include <limits>

namespace smp::kernels::cpu::test {
namespace {

const DType kFloats[] = {DType::F32, DType::F64, DType::F16, DType::BF16};
const DType kInts[] = {DType::I8, DType::I16, DType::I32, DType::I64,
                       DType::U8, DType::U16, DType::U32, DType::U64};

double atolFor(DType t) {
  return t == DType::F64   ? 1e-12
         : t == DType::F32 ? 1e-6
         : t == DType::F16 ? 1e-3
                           : 1e-2;
}

double refGelu(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double refGeluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

struct UnaryCase {
  UnaryOp op;
  double lo, hi;
  std::function<double(double)> ref;
};

TEST(Unary, FloatOpsMatchDoubleReference) {
  const UnaryCase cases[] = {
      {UnaryOp::Neg, -5, 5, [](double x) { return -x; }},
      {UnaryOp::Abs, -5, 5, [](double x) { return std::fabs(x); }},
      {UnaryOp::Exp, -8, 8, [](double x) { return std::exp(x); }},
      {UnaryOp::Log, 0.01, 50, [](double x) { return std::log(x); }},
      {UnaryOp::Sqrt, 0, 50, [](double x) { return std::sqrt(x); }},
      {UnaryOp::Rsqrt, 0.01, 50, [](double x) { return 1 / std::sqrt(x); }},
      {UnaryOp::Reciprocal, 0.1, 5, [](double x) { return 1 / x; }},
      {UnaryOp::Tanh, -5, 5, [](double x) { return std::tanh(x); }},
      {UnaryOp::Erf, -3, 3, [](double x) { return std::erf(x); }},
      {UnaryOp::Sigmoid, -30, 30,
       [](double x) { return 1 / (1 + std::exp(-x)); }},
      {UnaryOp::Silu, -10, 10, [](double x) { return x / (1 + std::exp(-x)); }},
      {UnaryOp::Relu, -5, 5, [](double x) { return x > 0 ? x : 0.0; }},
      {UnaryOp::Sin, -6, 6, [](double x) { return std::sin(x); }},
      {UnaryOp::Cos, -6, 6, [](double x) { return std::cos(x); }},
      {UnaryOp::Gelu, -6, 6, refGelu},
      {UnaryOp::GeluTanh, -6, 6, refGeluTanh},
  };
  unsigned seed = 1;
  for (const UnaryCase &c : cases)
    for (DType t : kFloats) {
      SCOPED_TRACE(std::string(unaryOpName(c.op)) + " " +
                   smp::base::dtypeName(t));
      Host x = random(t, {3, 37}, c.lo, c.hi, seed++);
      Host y(t, {3, 37});
      ASSERT_OK(unary(c.op, x, y));
      std::vector<double> want;
      for (double v : x.values()) // the stored (rounded) inputs
        want.push_back(c.ref(v));
      expectNear(y.values(), want, tolFor(t), atolFor(t));
    }
}

TEST(Unary, KnownValues) {
  Host x = make(DType::F64, {4}, {1.0, -1.0, 0.5, 0.0});
  Host y(DType::F64, {4});
  ASSERT_OK(gelu(x, false, y));
  EXPECT_NEAR(y.get(0), 0.8413447460685429, 1e-15);
  EXPECT_NEAR(y.get(1), -0.15865525393145707, 1e-15);
  ASSERT_OK(gelu(x, true, y));
  EXPECT_NEAR(y.get(0), 0.8411919906082768, 1e-15);
  ASSERT_OK(unary(UnaryOp::Erf, x, y));
  EXPECT_NEAR(y.get(0), 0.8427007929497149, 1e-15);
  EXPECT_NEAR(y.get(2), 0.5204998778130465, 1e-15);
  EXPECT_EQ(y.get(3), 0.0);
  Host xf = make(DType::F32, {1}, {1.0});
  Host yf(DType::F32, {1});
  ASSERT_OK(gelu(xf, false, yf));
  EXPECT_NEAR(yf.get(0), 0.8413447460685429, 1e-7);
  // Large magnitudes must not overflow to NaN.
  Host s(DType::F32, {2});
  ASSERT_OK(unary(UnaryOp::Sigmoid, make(DType::F32, {2}, {-1000, 1000}), s));
  EXPECT_EQ(s.get(0), 0.0);
  EXPECT_EQ(s.get(1), 1.0);
  ASSERT_OK(unary(UnaryOp::Relu, make(DType::F32, {2}, {NAN, -2}), s));
  EXPECT_TRUE(std::isnan(s.get(0)));
  EXPECT_EQ(s.get(1), 0.0);
}

TEST(Unary, LeakyReluAndInPlace) {
  Host x = make(DType::F32, {5}, {-2, -0.5, 0, 1.5, 3});
  ASSERT_OK(leakyRelu(x, 0.1f, x)); // in place
  expectNear(x.values(), {-0.2, -0.05, 0, 1.5, 3}, 1e-7);
  Host h = make(DType::F16, {2}, {-4, 4});
  Host o(DType::F16, {2});
  ASSERT_OK(leakyRelu(h, 0.25f, o));
  expectNear(o.values(), {-1, 4}, 0);
}

TEST(Unary, IntegersAndBool) {
  for (DType t : kInts) {
    SCOPED_TRACE(smp::base::dtypeName(t));
    bool sign = smp::base::isSignedInteger(t);
    Host x = make(t, {4}, {sign ? -3.0 : 3.0, 0, 7, sign ? -1.0 : 1.0});
    Host y(t, {4});
    ASSERT_OK(unary(UnaryOp::Abs, x, y));
    expectNear(y.values(), {3, 0, 7, 1}, 0);
    ASSERT_OK(unary(UnaryOp::Relu, x, y));
    expectNear(y.values(), {sign ? 0.0 : 3.0, 0, 7, sign ? 0.0 : 1.0}, 0);
    if (sign) {
      ASSERT_OK(unary(UnaryOp::Neg, x, y));
      expectNear(y.values(), {3, 0, -7, 1}, 0);
    }
    EXPECT_FALSE(unary(UnaryOp::Exp, x, y).ok());
  }
  Host i8 = make(DType::I8, {1}, {-128});
  Host o8(DType::I8, {1});
  ASSERT_OK(unary(UnaryOp::Neg, i8, o8)); // wraps
  EXPECT_EQ(o8.get(0), -128);
  Host b = make(DType::Bool, {3}, {1, 0, 1});
  Host nb(DType::Bool, {3});
  ASSERT_OK(unary(UnaryOp::Not, b, nb));
  expectNear(nb.values(), {0, 1, 0}, 0);
  EXPECT_FALSE(unary(UnaryOp::Not, make(DType::F32, {1}), nb).ok());
}

TEST(Unary, RejectsMismatchedOutput) {
  Host x(DType::F32, {2, 3});
  Host wrongShape(DType::F32, {3, 2}), wrongType(DType::F64, {2, 3});
  smp::base::Status s = unary(UnaryOp::Exp, x, wrongShape);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error.find("exp"), std::string::npos) << s.error;
  EXPECT_FALSE(unary(UnaryOp::Exp, x, wrongType).ok());
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

struct Shapes {
  std::vector<int64_t> a, b, out;
};
const Shapes kShapes[] = {
    {{3, 5}, {3, 5}, {3, 5}},
    {{3, 5}, {5}, {3, 5}},
    {{3, 1}, {1, 5}, {3, 5}},
    {{2, 1, 4, 3}, {5, 1, 3}, {2, 5, 4, 3}},
    {{}, {4, 3}, {4, 3}},
    {{7, 1, 1}, {}, {7, 1, 1}},
    {{1, 6, 1}, {2, 1, 1}, {2, 6, 1}},
    {{0, 3}, {3}, {0, 3}},
    {{130, 257}, {257}, {130, 257}}, // big enough to run in parallel
};

void checkBinary(BinaryOp op, DType t, double lo, double hi,
                 const std::function<double(double, double)> &ref,
                 DType outType, double tol) {
  unsigned seed = 100;
  for (const Shapes &s : kShapes) {
    SCOPED_TRACE(std::string(binaryOpName(op)) + " " + smp::base::dtypeName(t) +
                 " " + smp::base::describe(Host(t, s.out)));
    Host a = random(t, s.a, lo, hi, seed++), b = random(t, s.b, lo, hi, seed++);
    if (op == BinaryOp::Equal) // make some elements equal
      for (int64_t i = 0; i < b.numel(); i += 2)
        b.set(i, a.get(i % std::max<int64_t>(a.numel(), 1)));
    Host o(outType, s.out);
    ASSERT_OK(binary(op, a, b, o));
    std::vector<double> want(static_cast<size_t>(o.numel()));
    for (int64_t k = 0; k < o.numel(); ++k) {
      auto idx = unravel(k, s.out);
      want[k] =
          ref(a.get(broadcastIndex(idx, s.a)), b.get(broadcastIndex(idx, s.b)));
    }
    expectNear(o.values(), want, tol, tol);
  }
}

TEST(Binary, FloatBroadcastingMatchesReference) {
  for (DType t : kFloats) {
    double tol = tolFor(t);
    // Rounds the reference like the kernel's output type.
    checkBinary(BinaryOp::Add, t, -4, 4, std::plus<double>(), t, tol);
    checkBinary(BinaryOp::Sub, t, -4, 4, std::minus<double>(), t, tol);
    checkBinary(BinaryOp::Mul, t, -4, 4, std::multiplies<double>(), t, tol);
    checkBinary(BinaryOp::Div, t, 0.5, 4, std::divides<double>(), t, tol);
    checkBinary(
        BinaryOp::Pow, t, 0.5, 2,
        [](double a, double b) { return std::pow(a, b); }, t, tol);
    checkBinary(
        BinaryOp::Max, t, -4, 4,
        [](double a, double b) { return std::max(a, b); }, t, 0);
    checkBinary(
        BinaryOp::Min, t, -4, 4,
        [](double a, double b) { return std::min(a, b); }, t, 0);
    checkBinary(
        BinaryOp::Equal, t, -4, 4,
        [](double a, double b) { return double(a == b); }, DType::Bool, 0);
    checkBinary(
        BinaryOp::Less, t, -4, 4,
        [](double a, double b) { return double(a < b); }, DType::Bool, 0);
    checkBinary(
        BinaryOp::Greater, t, -4, 4,
        [](double a, double b) { return double(a > b); }, DType::Bool, 0);
  }
}

TEST(Binary, IntegerBroadcastingMatchesReference) {
  for (DType t : kInts) {
    bool sign = smp::base::isSignedInteger(t);
    double lo = sign ? -10 : 0, hi = 11;
    checkBinary(BinaryOp::Add, t, lo, hi, std::plus<double>(), t, 0);
    checkBinary(BinaryOp::Mul, t, lo, hi, std::multiplies<double>(), t, 0);
    if (sign) // unsigned wrap-around is checked in IntegerPowAndWrap
      checkBinary(
          BinaryOp::Sub, t, lo, hi, [](double a, double b) { return a - b; }, t,
          0);
    checkBinary(
        BinaryOp::Div, t, 1, 40,
        [](double a, double b) { return std::trunc(a / b); }, t, 0);
    checkBinary(
        BinaryOp::Max, t, lo, hi,
        [](double a, double b) { return std::max(a, b); }, t, 0);
    checkBinary(
        BinaryOp::Min, t, lo, hi,
        [](double a, double b) { return std::min(a, b); }, t, 0);
    checkBinary(
        BinaryOp::Pow, t, 0, 4,
        [](double a, double b) { return std::pow(a, b); }, t, 0);
    checkBinary(
        BinaryOp::Less, t, lo, hi,
        [](double a, double b) { return double(a < b); }, DType::Bool, 0);
  }
}

TEST(Binary, IntegerDivisionTruncatesAndRejectsZero) {
  Host a = make(DType::I32, {4}, {7, -7, 7, -7});
  Host b = make(DType::I32, {4}, {2, 2, -2, -2});
  Host o(DType::I32, {4});
  ASSERT_OK(binary(BinaryOp::Div, a, b, o));
  expectNear(o.values(), {3, -3, -3, 3}, 0);
  Host z = make(DType::I64, {2}, {1, 0});
  Host o64(DType::I64, {2});
  smp::base::Status s = binary(BinaryOp::Div, z, z, o64);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("div"), std::string::npos) << s.error;
  EXPECT_NE(s.error.find("zero"), std::string::npos) << s.error;
  Host m = make(DType::I32, {1}, {-2147483648.0}),
       m1 = make(DType::I32, {1}, {-1});
  Host om(DType::I32, {1});
  ASSERT_OK(binary(BinaryOp::Div, m, m1, om)); // wraps, no trap
  EXPECT_EQ(om.get(0), -2147483648.0);
  // Float division by zero is IEEE.
  Host f = make(DType::F32, {2}, {1, 0}), fo(DType::F32, {2});
  ASSERT_OK(binary(BinaryOp::Div, f, make(DType::F32, {}, {0}), fo));
  EXPECT_TRUE(std::isinf(fo.get(0)));
  EXPECT_TRUE(std::isnan(fo.get(1)));
}

TEST(Binary, IntegerPowAndWrap) {
  // Negative exponents truncate 1 / b^|e| toward zero (as the folder does).
  Host base = make(DType::I64, {8}, {2, 1, 2, -3, -1, -1, 0, 5});
  Host e = make(DType::I64, {8}, {10, -1, -1, 3, -3, -2, -1, 0});
  Host o(DType::I64, {8});
  ASSERT_OK(binary(BinaryOp::Pow, base, e, o));
  expectNear(o.values(), {1024, 1, 0, -27, -1, 1, 0, 1}, 0);
  Host u = make(DType::U8, {2}, {250, 3}), v = make(DType::U8, {2}, {10, 5});
  Host ou(DType::U8, {2});
  ASSERT_OK(binary(BinaryOp::Add, u, v, ou));
  expectNear(ou.values(), {4, 8}, 0);
  ASSERT_OK(binary(BinaryOp::Sub, v, u, ou));
  expectNear(ou.values(), {16, 2}, 0);
}

TEST(Binary, NanPropagatesThroughMaxMin) {
  Host a = make(DType::F32, {3}, {NAN, 1, 2}),
       b = make(DType::F32, {3}, {0, NAN, 1});
  Host o(DType::F32, {3});
  ASSERT_OK(binary(BinaryOp::Max, a, b, o));
  EXPECT_TRUE(std::isnan(o.get(0)));
  EXPECT_TRUE(std::isnan(o.get(1)));
  EXPECT_EQ(o.get(2), 2);
  ASSERT_OK(binary(BinaryOp::Min, a, b, o));
  EXPECT_TRUE(std::isnan(o.get(0)) && std::isnan(o.get(1)));
  EXPECT_EQ(o.get(2), 1);
  Host c(DType::Bool, {3});
  ASSERT_OK(binary(BinaryOp::Equal, a, a, c));
  expectNear(c.values(), {0, 1, 1}, 0);
}

TEST(Binary, LogicAndErrors) {
  Host a = make(DType::Bool, {4}, {0, 0, 1, 1}),
       b = make(DType::Bool, {2, 1}, {0, 1});
  Host o(DType::Bool, {2, 4});
  ASSERT_OK(binary(BinaryOp::And, a, b, o));
  expectNear(o.values(), {0, 0, 0, 0, 0, 0, 1, 1}, 0);
  ASSERT_OK(binary(BinaryOp::Or, a, b, o));
  expectNear(o.values(), {0, 0, 1, 1, 1, 1, 1, 1}, 0);
  Host f(DType::F32, {4});
  EXPECT_FALSE(binary(BinaryOp::And, f, f, o).ok()); // not Bool
  EXPECT_FALSE(
      binary(BinaryOp::Add, f, Host(DType::F32, {3}), f).ok()); // shapes
  EXPECT_FALSE(
      binary(BinaryOp::Add, f, Host(DType::F64, {4}), f).ok()); // dtypes
  EXPECT_FALSE(binary(BinaryOp::Add, f, f, Host(DType::F32, {2, 4})).ok());
  EXPECT_FALSE(binary(BinaryOp::Less, f, f, f).ok()); // out must be Bool
}

/// numpy.mod / math.fmod on doubles.
double floorModRef(double a, double b) {
  double r = std::fmod(a, b);
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

TEST(Binary, ModMatchesReference) {
  for (DType t : kFloats) {
    double tol = tolFor(t);
    checkBinary(BinaryOp::Mod, t, -4, 4, floorModRef, t, tol);
    checkBinary(
        BinaryOp::FMod, t, -4, 4,
        [](double a, double b) { return std::fmod(a, b); }, t, tol);
  }
  for (DType t : kInts) {
    // Divisors in [1, 9]: zero is an error (ModByZeroAndSigns).
    checkBinary(BinaryOp::Mod, t, 1, 10, floorModRef, t, 0);
    checkBinary(
        BinaryOp::FMod, t, 1, 10,
        [](double a, double b) { return std::fmod(a, b); }, t, 0);
  }
}

TEST(Binary, ModByZeroAndSigns) {
  // ONNX's test_mod_mixed_sign: the floor remainder takes the divisor's
  // sign, fmod the dividend's.
  std::vector<double> a = {-4, 7, 5, 4, -7, 8}, b = {2, -3, 8, -2, 3, 5};
  for (DType t : {DType::I8, DType::I16, DType::I32, DType::I64}) {
    Host x = make(t, {6}, a), y = make(t, {6}, b), o(t, {6});
    ASSERT_OK(binary(BinaryOp::Mod, x, y, o));
    expectNear(o.values(), {0, -2, 5, 0, 2, 3}, 0);
    ASSERT_OK(binary(BinaryOp::FMod, x, y, o));
    expectNear(o.values(), {0, 1, 5, 0, -1, 3}, 0);
  }
  std::vector<double> fa = {-4.3, 7.2, 5.0, 4.3, -7.2, 8.0},
                      fb = {2.1, -3.4, 8.0, -2.1, 3.4, -8.0};
  for (DType t : {DType::F32, DType::F64}) {
    Host x = make(t, {6}, fa), y = make(t, {6}, fb), o(t, {6});
    std::vector<double> wantMod, wantFmod;
    for (int i = 0; i < 6; ++i) {
      wantMod.push_back(floorModRef(x.get(i), y.get(i)));
      wantFmod.push_back(std::fmod(x.get(i), y.get(i)));
    }
    ASSERT_OK(binary(BinaryOp::Mod, x, y, o));
    expectNear(o.values(), wantMod, tolFor(t));
    ASSERT_OK(binary(BinaryOp::FMod, x, y, o));
    expectNear(o.values(), wantFmod, 0); // fmod is exact
  }
  // INT_MIN % -1 is 0 (no trap); a remainder by zero is an error naming
  // the op; a float one is NaN.
  Host m = make(DType::I32, {1}, {-2147483648.0}),
       m1 = make(DType::I32, {1}, {-1}), om(DType::I32, {1});
  ASSERT_OK(binary(BinaryOp::Mod, m, m1, om));
  EXPECT_EQ(om.get(0), 0);
  ASSERT_OK(binary(BinaryOp::FMod, m, m1, om));
  EXPECT_EQ(om.get(0), 0);
  Host z = make(DType::I64, {2}, {5, 0}), o64(DType::I64, {2});
  smp::base::Status s =
      binary(BinaryOp::Mod, make(DType::I64, {2}, {3, 3}), z, o64);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error, "mod: integer division by zero");
  s = binary(BinaryOp::FMod, make(DType::U8, {1}, {3}),
             make(DType::U8, {1}, {0}), Host(DType::U8, {1}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error, "fmod: integer division by zero");
  Host f = make(DType::F32, {1}, {1}), fo(DType::F32, {1});
  ASSERT_OK(binary(BinaryOp::Mod, f, make(DType::F32, {}, {0}), fo));
  EXPECT_TRUE(std::isnan(fo.get(0)));
  // Unsigned values above the signed range.
  Host u = make(DType::U64, {1}), uv = make(DType::U64, {1}, {10}),
       uo(DType::U64, {1});
  u.as<uint64_t>()[0] = ~uint64_t(0);
  ASSERT_OK(binary(BinaryOp::Mod, u, uv, uo));
  EXPECT_EQ(uo.as<uint64_t>()[0], 5u);
  EXPECT_FALSE(binary(BinaryOp::Mod, make(DType::Bool, {1}),
                      make(DType::Bool, {1}), Host(DType::Bool, {1}))
                   .ok());
}

TEST(Binary, InPlace) {
  Host a = random(DType::F32, {4, 8}, -1, 1, 7),
       b = random(DType::F32, {8}, -1, 1, 8);
  Host want(DType::F32, {4, 8});
  ASSERT_OK(binary(BinaryOp::Mul, a, b, want));
  ASSERT_OK(binary(BinaryOp::Mul, a, b, a));
  expectNear(a.values(), want.values(), 0);
}

TEST(Where, BroadcastsAllThree) {
  for (DType t :
       {DType::F32, DType::F16, DType::I64, DType::Bool, DType::F64}) {
    SCOPED_TRACE(smp::base::dtypeName(t));
    Host c = random(DType::Bool, {3, 1, 5}, 0, 2, 1);
    Host a = random(t, {4, 1}, -5, 5, 2), b = random(t, {5}, -5, 5, 3);
    Host o(t, {3, 4, 5});
    ASSERT_OK(where(c, a, b, o));
    for (int64_t k = 0; k < o.numel(); ++k) {
      auto idx = unravel(k, o.ref.shape);
      double want = c.get(broadcastIndex(idx, c.ref.shape))
                        ? a.get(broadcastIndex(idx, a.ref.shape))
                        : b.get(broadcastIndex(idx, b.ref.shape));
      ASSERT_EQ(o.get(k), want) << k;
    }
  }
  Host f(DType::F32, {2});
  EXPECT_FALSE(where(f, f, f, f).ok()); // condition must be Bool
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

TEST(Cast, EveryPairOnSmallValues) {
  const DType all[] = {DType::F32,  DType::F64, DType::F16, DType::BF16,
                       DType::Bool, DType::I8,  DType::I16, DType::I32,
                       DType::I64,  DType::U8,  DType::U16, DType::U32,
                       DType::U64};
  for (DType from : all)
    for (DType to : all) {
      SCOPED_TRACE(std::string(smp::base::dtypeName(from)) + " -> " +
                   smp::base::dtypeName(to));
      std::vector<double> vals = {0, 1, 2, 5, 100, 7};
      if (from == DType::Bool)
        vals = {0, 1, 1, 0, 1, 0};
      if (smp::base::isSignedInteger(from) || smp::base::isFloat(from))
        vals[3] = -5;
      if (smp::base::isFloat(from))
        vals[5] = -2.75;
      Host x = make(from, {2, 3}, vals), y(to, {2, 3});
      ASSERT_OK(cast(x, y));
      for (int64_t i = 0; i < 6; ++i) {
        double v = x.get(i), want;
        if (to == DType::Bool)
          want = v != 0;
        else if (smp::base::isFloat(to))
          want = v;
        else {
          want = std::trunc(v);
          if (want < 0 &&
              !smp::base::isSignedInteger(to)) // wraps modulo 2^bits
            want += std::ldexp(1.0, 8 * int(smp::base::dtypeSize(to)));
        }
        EXPECT_EQ(y.get(i), want) << i;
      }
    }
}

TEST(Cast, RoundingAndSpecialValues) {
  Host x = make(DType::F32, {6}, {2.7, -2.7, NAN, INFINITY, 1e30, -1e30});
  Host i(DType::I32, {6});
  ASSERT_OK(cast(x, i));
  EXPECT_EQ(i.get(0), 2);
  EXPECT_EQ(i.get(1), -2);
  EXPECT_EQ(i.get(2), 0);
  Host i64(DType::I64, {6});
  ASSERT_OK(cast(x, i64));
  EXPECT_EQ(i64.as<int64_t>()[3], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(i64.as<int64_t>()[5], std::numeric_limits<int64_t>::min());
  Host b(DType::Bool, {6});
  ASSERT_OK(cast(x, b));
  expectNear(b.values(), {1, 1, 1, 1, 1, 1}, 0);
  // f32 -> f16 rounds to nearest even; overflow gives inf.
  Host h(DType::F16, {3});
  ASSERT_OK(cast(make(DType::F32, {3}, {1.0 + 1.0 / 2048, 65520, 1e-8}), h));
  EXPECT_EQ(h.get(0), 1.0);
  EXPECT_TRUE(std::isinf(h.get(1)));
  EXPECT_EQ(h.get(2), 0.0);
  // Large u64 survive the round trip through u64 -> f64 -> u64.
  Host u = make(DType::U64, {1});
  u.as<uint64_t>()[0] = uint64_t(1) << 63;
  Host d(DType::F64, {1}), back(DType::U64, {1});
  ASSERT_OK(cast(u, d));
  ASSERT_OK(cast(d, back));
  EXPECT_EQ(back.as<uint64_t>()[0], uint64_t(1) << 63);
}

/// cast_multi: the bytes of a cast of each tensor; mismatched lists and
/// shapes are refused, naming the tensor.
TEST(Cast, MultiIsEachCast) {
  std::vector<Host> in, out, want;
  const std::pair<DType, DType> pairs[] = {{DType::F32, DType::BF16},
                                           {DType::F32, DType::F16},
                                           {DType::BF16, DType::F32},
                                           {DType::F64, DType::F32}};
  for (int i = 0; i < 8; ++i) {
    auto [from, to] = pairs[i % 4];
    std::vector<int64_t> shape =
        i == 3 ? std::vector<int64_t>{0, 4} : std::vector<int64_t>{i + 1, 5};
    std::vector<double> vals;
    for (int64_t k = 0; k < (i == 3 ? 0 : (i + 1) * 5); ++k)
      vals.push_back(std::ldexp(1.0 + k / 3.0, (k % 7) - 3) * (k % 2 ? -1 : 1));
    in.push_back(make(from, shape, vals));
    out.emplace_back(to, shape);
    want.emplace_back(to, shape);
    ASSERT_OK(cast(in.back(), want.back()));
  }
  std::vector<TensorRef> ins, outs;
  for (size_t i = 0; i < in.size(); ++i) {
    ins.push_back(in[i].ref);
    outs.push_back(out[i].ref);
  }
  ASSERT_OK(castMulti(ins, outs));
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_EQ(
        std::memcmp(out[i].ref.data, want[i].ref.data, want[i].ref.bytes()), 0)
        << "tensor " << i;
  Status s = castMulti(ins, {outs.begin(), outs.end() - 1});
  EXPECT_EQ(s.error, "cast_multi: 8 inputs but 7 outputs");
  std::swap(outs[0], outs[1]);
  s = castMulti(ins, outs);
  EXPECT_EQ(s.error.rfind("cast_multi: output #0", 0), 0u) << s.error;
}

/// add_multi: the bits of casting each operand to f32 and adding, one pair
/// empty, a sum written over its f32 first operand; mismatched lists, a
/// result that is not f32 and an f64 operand are refused, naming them.
TEST(Cast, AddMultiIsEachCastAndAdd) {
  const std::pair<DType, DType> types[] = {{DType::F32, DType::BF16},
                                           {DType::BF16, DType::BF16},
                                           {DType::F16, DType::F32},
                                           {DType::F32, DType::F32}};
  std::vector<Host> lhs, rhs, out, want;
  for (int i = 0; i < 8; ++i) {
    auto [lt, rt] = types[i % 4];
    int64_t n = i == 5 ? 0 : (i + 1) * 5;
    std::vector<int64_t> shape{n};
    std::vector<double> a, b;
    for (int64_t k = 0; k < n; ++k) {
      a.push_back(std::ldexp(1.0 + k / 3.0, (k % 7) - 3) * (k % 2 ? -1 : 1));
      b.push_back(std::ldexp(1.0 + k / 7.0, (k % 5) - 9) * (k % 3 ? 1 : -1));
    }
    lhs.push_back(make(lt, shape, a));
    rhs.push_back(make(rt, shape, b));
    out.emplace_back(DType::F32, shape);
    Host wa(DType::F32, shape), wb(DType::F32, shape);
    ASSERT_OK(cast(lhs.back(), wa));
    ASSERT_OK(cast(rhs.back(), wb));
    want.emplace_back(DType::F32, shape);
    ASSERT_OK(binary(BinaryOp::Add, wa, wb, want.back()));
  }
  std::vector<TensorRef> ls, rs, outs;
  for (size_t i = 0; i < out.size(); ++i) {
    ls.push_back(lhs[i].ref);
    rs.push_back(rhs[i].ref);
    // Pair 0's sum over its f32 lhs, as the artifact shares them.
    outs.push_back(i == 0 ? lhs[i].ref : out[i].ref);
  }
  ASSERT_OK(addMulti(ls, rs, outs));
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(std::memcmp(outs[i].data, want[i].ref.data, want[i].ref.bytes()),
              0)
        << "pair " << i;
  Status s = addMulti(ls, rs, {outs.begin(), outs.end() - 1});
  EXPECT_EQ(s.error, "add_multi: 8 lhs, 8 rhs but 7 outputs");
  s = addMulti(ls, rs, {ls[1]});
  EXPECT_EQ(s.error, "add_multi: 8 lhs, 8 rhs but 1 outputs");
  Host h(DType::BF16, {5}), d(DType::F64, {5}), f(DType::F32, {5});
  s = addMulti({f.ref}, {f.ref}, {h.ref});
  EXPECT_EQ(s.error.rfind("add_multi: output #0", 0), 0u) << s.error;
  s = addMulti({f.ref}, {d.ref}, {f.ref});
  EXPECT_EQ(
      s.error.rfind("add_multi: rhs #0 is 5xf64, not f32, f16 or bf16", 0), 0u)
      << s.error;
}

} // namespace
} // namespace smp::kernels::cpu::test
