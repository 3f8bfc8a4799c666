//===- CudaKernelsTest.cpp - CUDA forward kernels against the CPU ---------===//

#include "CudaTestUtil.h"

#include <limits>
#include <memory>

namespace smp_cuda_test {
namespace {

::testing::Environment *const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new CudaEnvironment);

/// lo, or 0 for unsigned types and Bool (host conversions of negative
/// doubles to them are undefined).
double lowFor(DType t, double lo) {
  return smp::base::isFloat(t) || smp::base::isSignedInteger(t) ? lo : 0;
}

const DType kFloats[] = {DType::F32, DType::F64, DType::F16, DType::BF16};
const DType kInts[] = {DType::I8,  DType::I16, DType::I32, DType::I64,
                       DType::U8,  DType::U16, DType::U32, DType::U64};

//===----------------------------------------------------------------------===//
// Context
//===----------------------------------------------------------------------===//

TEST_F(Cuda, NoCurrentContextIsAnError) {
  cuk::setCurrentContext(nullptr);
  Host x = random(DType::F32, {4}, -1, 1, 1);
  Dev dx(x), dy(DType::F32, {4});
  Status s = cuk::unary(cuk::UnaryOp::Neg, dx, dy);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.error.find("no current CUDA context"), std::string::npos)
      << s.error;
  cuk::setCurrentContext(sharedContext());
  EXPECT_EQ(cuk::currentContext(), sharedContext());
}

TEST_F(Cuda, ShapeErrorsAreReportedOnTheHost) {
  Dev a(DType::F32, {2, 3}), b(DType::F32, {4}), o(DType::F32, {2, 3});
  Status s = cuk::binary(cuk::BinaryOp::Add, a, b, o);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error.rfind("add: cannot broadcast", 0), 0u) << s.error;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_F(Cuda, UnaryFloat) {
  using U = cuk::UnaryOp;
  struct Case {
    U op;
    double lo, hi;
  };
  const Case cases[] = {
      {U::Neg, -4, 4},   {U::Abs, -4, 4},        {U::Exp, -5, 5},
      {U::Log, 0.1, 5},  {U::Sqrt, 0.1, 5},      {U::Rsqrt, 0.1, 5},
      {U::Reciprocal, 0.2, 3}, {U::Tanh, -4, 4}, {U::Erf, -3, 3},
      {U::Sigmoid, -8, 8}, {U::Silu, -8, 8},     {U::Relu, -4, 4},
      {U::Sin, -4, 4},   {U::Cos, -4, 4},        {U::Gelu, -5, 5},
      {U::GeluTanh, -5, 5}};
  unsigned seed = 1;
  // [3, 37]: elementwise; [4, 64]: f16/bf16 activations on 16-byte vectors.
  for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 37}, {4, 64}})
    for (DType t : kFloats)
      for (const Case &c : cases) {
        SCOPED_TRACE(std::string(cuk::unaryOpName(c.op)) + " " + name(t) + " " +
                     std::to_string(shape[1]));
        Host x = random(t, shape, c.lo, c.hi, seed++), want(t, shape);
        ASSERT_OK(cpuk::unary(static_cast<cpuk::UnaryOp>(c.op), x, want));
        Dev dx(x), dy(t, shape);
        ASSERT_OK(cuk::unary(c.op, dx, dy));
        expectTol(dy, want);
      }
}

TEST_F(Cuda, UnaryIntegerAndBoolAndInPlace) {
  using U = cuk::UnaryOp;
  unsigned seed = 10;
  for (DType t : kInts)
    for (U op : {U::Neg, U::Abs, U::Relu}) {
      SCOPED_TRACE(std::string(cuk::unaryOpName(op)) + " " + name(t));
      Host x = random(t, {50}, lowFor(t, -100), 100, seed++), want(t, {50});
      ASSERT_OK(cpuk::unary(static_cast<cpuk::UnaryOp>(op), x, want));
      Dev dx(x), dy(t, {50});
      ASSERT_OK(cuk::unary(op, dx, dy));
      expectSameBytes(dy, want);
    }
  Host b = random(DType::Bool, {33}, 0, 2, 3), nb(DType::Bool, {33});
  ASSERT_OK(cpuk::unary(cpuk::UnaryOp::Not, b, nb));
  Dev db(b), dnb(DType::Bool, {33});
  ASSERT_OK(cuk::unary(U::Not, db, dnb));
  expectSameBytes(dnb, nb);
  // In place.
  Host x = random(DType::F32, {100}, -3, 3, 4), want(DType::F32, {100});
  ASSERT_OK(cpuk::unary(cpuk::UnaryOp::Tanh, x, want));
  Dev dx(x);
  ASSERT_OK(cuk::unary(U::Tanh, dx, dx));
  expectTol(dx, want);
  EXPECT_FALSE(cuk::unary(U::Exp, Dev(DType::I32, {2}), Dev(DType::I32, {2})).ok());
}

TEST_F(Cuda, LeakyReluAndGelu) {
  unsigned seed = 20;
  for (DType t : kFloats) {
    SCOPED_TRACE(name(t));
    Host x = random(t, {5, 9}, -4, 4, seed++), want(t, {5, 9});
    ASSERT_OK(cpuk::leakyRelu(x, 0.1f, want));
    Dev dx(x), dy(t, {5, 9});
    ASSERT_OK(cuk::leakyRelu(dx, 0.1f, dy));
    expectTol(dy, want);
    for (bool approx : {false, true}) {
      ASSERT_OK(cpuk::gelu(x, approx, want));
      ASSERT_OK(cuk::gelu(dx, approx, dy));
      expectTol(dy, want);
    }
  }
}

TEST_F(Cuda, DropoutDrawsTheCpuMask) {
  unsigned seed = 40;
  for (DType t : kFloats) {
    SCOPED_TRACE(name(t));
    Host x = random(t, {6, 10, 12}, -4, 4, seed++), want(t, {6, 10, 12});
    smp::kernels::DropoutKey key;
    key.seed = 0x123456789ull, key.step = 5, key.stream = 3, key.ratio = 0.3;
    key.samples = 6, key.sampleOffset = 12;
    key.tpDim = 2, key.tpParts = 4, key.tpBlocks = 3, key.tpIndex = 1;
    ASSERT_OK(cpuk::dropout(x, key, want));
    Dev dx(x), dy(t, {6, 10, 12});
    ASSERT_OK(cuk::dropout(dx, key, dy));
    expectTol(dy, want);
  }
}

struct Shapes {
  std::vector<int64_t> a, b;
};
const Shapes kBroadcasts[] = {
    {{4, 5}, {4, 5}},
    {{4, 5}, {5}},
    {{4, 1}, {1, 5}},
    {{2, 3, 4}, {3, 1}},
    {{1}, {2, 3}},
    {{}, {3, 2}},
    {{2, 1, 3, 1}, {4, 1, 5}},
    {{6, 1, 7}, {6, 8, 7}},
    {{0, 3}, {3}},
    // Whole 16-byte vectors of every type, no broadcast: Add, Sub and Mul
    // take the vector kernel (binaryVecKernel), the same values.
    {{6, 8, 7}, {6, 8, 7}},
};

TEST_F(Cuda, BinaryFloatBroadcasting) {
  using B = cuk::BinaryOp;
  unsigned seed = 30;
  for (DType t : kFloats)
    for (B op : {B::Add, B::Sub, B::Mul, B::Div, B::Pow, B::Max, B::Min,
                 B::Equal, B::Less, B::Greater, B::Mod, B::FMod})
      for (const Shapes &sh : kBroadcasts) {
        SCOPED_TRACE(std::string(cuk::binaryOpName(op)) + " " + name(t) + " " +
                     std::to_string(sh.a.size()) + "d/" +
                     std::to_string(sh.b.size()) + "d");
        bool pow = op == B::Pow, div = op == B::Div;
        Host a = random(t, sh.a, pow ? 0.5 : -3, pow ? 2 : 3, seed++);
        Host b = random(t, sh.b, pow ? -2 : (div ? 0.5 : -3), pow ? 2 : 3,
                        seed++);
        if (op == B::Equal && a.numel() && b.numel())
          b.set(0, a.get(0)); // one equal pair at least
        std::vector<int64_t> shape;
        bool cmp = op == B::Equal || op == B::Less || op == B::Greater;
        // Output shape: numpy broadcast.
        size_t r = std::max(sh.a.size(), sh.b.size());
        shape.assign(r, 1);
        for (size_t i = 0; i < r; ++i) {
          int64_t da = i < r - sh.a.size() ? 1 : sh.a[i - (r - sh.a.size())];
          int64_t db = i < r - sh.b.size() ? 1 : sh.b[i - (r - sh.b.size())];
          shape[i] = da == 1 ? db : da;
        }
        DType ot = cmp ? DType::Bool : t;
        Host want(ot, shape);
        ASSERT_OK(cpuk::binary(static_cast<cpuk::BinaryOp>(op), a, b, want));
        Dev da(a), db(b), dout(ot, shape);
        ASSERT_OK(cuk::binary(op, da, db, dout));
        if (cmp)
          expectSameBytes(dout, want);
        else
          expectTol(dout, want);
      }
}

TEST_F(Cuda, BinaryIntegerAndBool) {
  using B = cuk::BinaryOp;
  unsigned seed = 40;
  for (DType t : kInts)
    for (B op : {B::Add, B::Sub, B::Mul, B::Div, B::Pow, B::Max, B::Min,
                 B::Equal, B::Less, B::Greater, B::Mod, B::FMod}) {
      SCOPED_TRACE(std::string(cuk::binaryOpName(op)) + " " + name(t));
      bool sgn = smp::base::isSignedInteger(t);
      Host a = random(t, {3, 8}, sgn ? -60 : 0, 120, seed++);
      Host b = random(t, {8}, op == B::Pow ? (sgn ? -2 : 0) : 1,
                      op == B::Pow ? 5 : 13, seed++);
      if ((op == B::Div || op == B::Mod || op == B::FMod) && sgn)
        for (int64_t i = 0; i < 8; i += 2)
          b.set(i, -b.get(i)); // negative divisors too
      bool cmp = op == B::Equal || op == B::Less || op == B::Greater;
      DType ot = cmp ? DType::Bool : t;
      Host want(ot, {3, 8});
      ASSERT_OK(cpuk::binary(static_cast<cpuk::BinaryOp>(op), a, b, want));
      Dev da(a), db(b), dout(ot, {3, 8});
      ASSERT_OK(cuk::binary(op, da, db, dout));
      expectSameBytes(dout, want);
    }
  for (B op : {B::And, B::Or, B::Equal, B::Less, B::Greater, B::Max, B::Min}) {
    SCOPED_TRACE(cuk::binaryOpName(op));
    Host a = random(DType::Bool, {4, 6}, 0, 2, seed++);
    Host b = random(DType::Bool, {4, 1}, 0, 2, seed++), want(DType::Bool, {4, 6});
    ASSERT_OK(cpuk::binary(static_cast<cpuk::BinaryOp>(op), a, b, want));
    Dev da(a), db(b), dout(DType::Bool, {4, 6});
    ASSERT_OK(cuk::binary(op, da, db, dout));
    expectSameBytes(dout, want);
  }
}

TEST_F(Cuda, IntegerDivisionByZeroIsADeviceError) {
  Host a = make(DType::I32, {4}, {1, 2, 3, 4}), b = make(DType::I32, {4}, {1, 0, 1, 1});
  Dev da(a), db(b), dout(DType::I32, {4});
  ASSERT_OK(cuk::binary(cuk::BinaryOp::Div, da, db, dout));
  expectDeviceError("div: integer division by zero");
  ASSERT_OK(sync()); // the flag is cleared
}

TEST_F(Cuda, IntegerRemainderByZeroIsADeviceError) {
  Host a = make(DType::I64, {3}, {5, -7, 3}), b = make(DType::I64, {3}, {2, 3, 0});
  Dev da(a), db(b), dout(DType::I64, {3});
  ASSERT_OK(cuk::binary(cuk::BinaryOp::Mod, da, db, dout));
  expectDeviceError("mod: integer division by zero");
  ASSERT_OK(cuk::binary(cuk::BinaryOp::FMod, da, db, dout));
  expectDeviceError("fmod: integer division by zero");
  ASSERT_OK(sync());
}

TEST_F(Cuda, Where) {
  unsigned seed = 50;
  for (DType t : {DType::F32, DType::F16, DType::I64, DType::Bool, DType::U8}) {
    SCOPED_TRACE(name(t));
    Host c = random(DType::Bool, {3, 1, 5}, 0, 2, seed++);
    Host a = random(t, {4, 5}, lowFor(t, -9), 9, seed++),
         b = random(t, {1}, lowFor(t, -9), 9, seed++);
    Host want(t, {3, 4, 5});
    ASSERT_OK(cpuk::where(c, a, b, want));
    Dev dc(c), da(a), db(b), dout(t, {3, 4, 5});
    ASSERT_OK(cuk::where(dc, da, db, dout));
    expectSameBytes(dout, want);
  }
}

TEST_F(Cuda, CastBetweenAllDtypes) {
  const DType all[] = {DType::F32, DType::F64, DType::F16,  DType::BF16,
                       DType::Bool, DType::I8, DType::I16,  DType::I32,
                       DType::I64, DType::U8,  DType::U16,  DType::U32,
                       DType::U64};
  unsigned seed = 60;
  for (DType from : all) {
    double hi = from == DType::I8 || from == DType::U8 ? 120 : 300;
    Host x = random(from, {40}, lowFor(from, -hi), hi, seed++);
    if (smp::base::isFloat(from)) {
      x.set(0, std::numeric_limits<double>::quiet_NaN());
      x.set(1, 1e30); // saturates / infinity in the half types
      x.set(2, -2.5);
      x.set(3, 0.0);
    }
    for (DType to : all) {
      SCOPED_TRACE(std::string(name(from)) + " -> " + name(to));
      Host want(to, {40});
      ASSERT_OK(cpuk::cast(x, want));
      Dev dx(x), dy(to, {40});
      ASSERT_OK(cuk::cast(dx, dy));
      expectClose(dy, want, 0, 0);
    }
  }
}

//===----------------------------------------------------------------------===//
// MatMul
//===----------------------------------------------------------------------===//

TEST_F(Cuda, MatMulShapesTransposesAndBroadcasts) {
  struct Case {
    std::vector<int64_t> a, b;
    bool ta, tb;
  };
  const Case cases[] = {
      {{5, 7}, {7, 3}, false, false},     {{7, 5}, {7, 3}, true, false},
      {{5, 7}, {3, 7}, false, true},      {{7, 5}, {3, 7}, true, true},
      {{4, 5, 7}, {4, 7, 3}, false, false}, {{4, 5, 7}, {7, 3}, false, false},
      {{4, 7, 5}, {7, 3}, true, false},   {{5, 7}, {4, 7, 3}, false, false},
      {{2, 1, 5, 7}, {1, 3, 3, 7}, false, true},
      {{7}, {7, 3}, false, false},        {{5, 7}, {7}, false, false},
      {{7}, {7}, false, false},           {{3, 2, 5, 7}, {2, 7, 6}, false, false},
      {{64, 128}, {128, 96}, false, false}, {{33, 17}, {17, 65}, false, false},
      {{2, 48, 40}, {2, 56, 40}, false, true}, {{5, 0}, {0, 3}, false, false},
  };
  unsigned seed = 70;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32,
                  DType::I64})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(name(t)) + " " +
                   smp::base::describe(make(t, c.a)) + " x " +
                   smp::base::describe(make(t, c.b)) + (c.ta ? " tA" : "") +
                   (c.tb ? " tB" : ""));
      bool isInt = !smp::base::isFloat(t);
      Host a = random(t, c.a, isInt ? -5 : -1, isInt ? 5 : 1, seed++);
      Host b = random(t, c.b, isInt ? -5 : -1, isInt ? 5 : 1, seed++);
      // The CPU decides the output shape (it checks it): try the CPU with an
      // output of the shape numpy.matmul gives.
      std::vector<int64_t> sa = c.a, sb = c.b;
      bool pa = sa.size() == 1, pb = sb.size() == 1;
      if (pa)
        sa.insert(sa.begin(), 1);
      if (pb)
        sb.push_back(1);
      int64_t m = c.ta ? sa.back() : sa[sa.size() - 2];
      int64_t n = c.tb ? sb[sb.size() - 2] : sb.back();
      std::vector<int64_t> ba(sa.begin(), sa.end() - 2),
          bb(sb.begin(), sb.end() - 2), shape;
      size_t r = std::max(ba.size(), bb.size());
      shape.assign(r, 1);
      for (size_t i = 0; i < r; ++i) {
        int64_t x = i < r - ba.size() ? 1 : ba[i - (r - ba.size())];
        int64_t y = i < r - bb.size() ? 1 : bb[i - (r - bb.size())];
        shape[i] = x == 1 ? y : x;
      }
      if (!pa)
        shape.push_back(m);
      if (!pb)
        shape.push_back(n);
      Host want(t, shape);
      ASSERT_OK(cpuk::matmul(a, b, want, c.ta, c.tb));
      Dev da(a), db(b), dout(t, shape);
      ASSERT_OK(cuk::matmul(da, db, dout, c.ta, c.tb));
      if (isInt)
        expectSameBytes(dout, want);
      else
        expectTol(dout, want, true);
    }
}

//===----------------------------------------------------------------------===//
// Reductions and softmax
//===----------------------------------------------------------------------===//

TEST_F(Cuda, Reduce) {
  struct Case {
    std::vector<int64_t> shape, axes;
    bool keep;
  };
  const Case cases[] = {
      {{4, 300}, {1}, false},
      {{300, 5}, {0}, false},
      {{3, 4, 5}, {0, 2}, true},
      {{3, 4, 5}, {1}, false},
      {{2, 3, 4, 5}, {-1, 1}, false},
      {{6, 7}, {0, 1}, false},
      {{5}, {}, false},
      {{2, 1, 3}, {1}, false},
      {{2, 0, 3}, {1}, false},
      {{2, 2000}, {-1}, true},
      // Long columns, few outputs: the rows split into chunks (a bias
      // gradient's shape; one chunk's tail; two reduced groups).
      {{4, 1300, 40}, {0, 1}, false},
      {{2500, 3}, {0}, true},
      {{40, 3, 60, 5}, {0, 2}, false},
      // Few long rows: split into chunks too (a full sum, kept dims).
      {{2, 50000}, {1}, false},
      {{70001}, {0}, true},
  };
  using R = cuk::ReduceOp;
  unsigned seed = 90;
  for (R op : {R::Sum, R::Mean, R::Max})
    for (DType t : {DType::F32, DType::F64, DType::BF16, DType::I32, DType::U8,
                    DType::I64})
      for (const Case &c : cases) {
        SCOPED_TRACE(std::string(op == R::Sum    ? "sum "
                                 : op == R::Mean ? "mean "
                                                 : "max ") +
                     name(t) + " " + smp::base::describe(make(t, c.shape)));
        Host x = random(t, c.shape, smp::base::isFloat(t) ? -2 : 0,
                        smp::base::isFloat(t) ? 2 : 50, seed++);
        std::vector<bool> red(c.shape.size(), false);
        for (int64_t a : c.axes)
          red[a < 0 ? a + static_cast<int64_t>(c.shape.size()) : a] = true;
        std::vector<int64_t> out;
        for (size_t d = 0; d < c.shape.size(); ++d)
          if (!red[d] || c.keep)
            out.push_back(red[d] ? 1 : c.shape[d]);
        Host want(t, out);
        ASSERT_OK(cpuk::reduce(static_cast<cpuk::ReduceOp>(op), x, c.axes, want));
        Dev dx(x), dout(t, out);
        ASSERT_OK(cuk::reduce(op, dx, c.axes, dout));
        if (smp::base::isFloat(t))
          expectTol(dout, want, true);
        else
          expectSameBytes(dout, want);
      }
  Host b = random(DType::Bool, {4, 9}, 0, 2, 5), want(DType::Bool, {4});
  ASSERT_OK(cpuk::reduce(cpuk::ReduceOp::Max, b, {1}, want));
  Dev db(b), dout(DType::Bool, {4});
  ASSERT_OK(cuk::reduce(R::Max, db, {1}, dout));
  expectSameBytes(dout, want);
}

TEST_F(Cuda, CumSum) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  const Case cases[] = {{{7}, 0},        {{4, 300}, 1}, {{300, 5}, 0},
                        {{3, 4, 5}, -2}, {{2, 0, 3}, 1}, {{2, 3, 1}, 2}};
  unsigned seed = 95;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32,
                  DType::I64, DType::U8})
    for (const Case &c : cases)
      for (int flags = 0; flags < 4; ++flags) {
        bool exclusive = flags & 1, reverse = flags & 2;
        SCOPED_TRACE(std::string(name(t)) + " " +
                     smp::base::describe(make(t, c.shape)) + " axis " +
                     std::to_string(c.axis) + (exclusive ? " exclusive" : "") +
                     (reverse ? " reverse" : ""));
        Host x = random(t, c.shape, smp::base::isFloat(t) ? -2 : 0,
                        smp::base::isFloat(t) ? 2 : 50, seed++);
        Host want(t, c.shape);
        ASSERT_OK(cpuk::cumsum(x, c.axis, exclusive, reverse, want));
        Dev dx(x), dout(t, c.shape);
        ASSERT_OK(cuk::cumsum(dx, c.axis, exclusive, reverse, dout));
        // The same additions in the same order, in double.
        expectSameBytes(dout, want);
      }
  Dev b(DType::Bool, {3}), bo(DType::Bool, {3});
  EXPECT_FALSE(cuk::cumsum(b, 0, false, false, bo).ok());
}

TEST_F(Cuda, SoftmaxAndLogSoftmax) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  const Case cases[] = {{{4, 33}, -1}, {{3, 5, 7}, 1}, {{2, 1000}, 1},
                        {{6}, 0},      {{}, 0},        {{2, 3, 4}, 0},
                        {{0, 5}, 1}};
  unsigned seed = 110;
  for (DType t : kFloats)
    for (const Case &c : cases)
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(log ? "log_softmax " : "softmax ") + name(t) +
                     " " + smp::base::describe(make(t, c.shape)));
        Host x = random(t, c.shape, -6, 6, seed++), want(t, c.shape);
        if (log)
          ASSERT_OK(cpuk::logSoftmax(x, c.axis, want));
        else
          ASSERT_OK(cpuk::softmax(x, c.axis, want));
        Dev dx(x), dout(t, c.shape);
        if (log)
          ASSERT_OK(cuk::logSoftmax(dx, c.axis, dout));
        else
          ASSERT_OK(cuk::softmax(dx, c.axis, dout));
        expectTol(dout, want, true);
      }
}

//===----------------------------------------------------------------------===//
// Norms and losses
//===----------------------------------------------------------------------===//

TEST_F(Cuda, LayerNormRmsNormBatchNorm) {
  std::vector<NormCase> cases = normCases();
  cases.push_back({{3, 1500}, 1, {1500}, {1500}}); // more than a block's rows
  unsigned seed = 130;
  for (DType t : kFloats) {
    for (const NormCase &c : cases) {
      SCOPED_TRACE(std::string("layer_norm ") + name(t) + " " +
                   smp::base::describe(make(t, c.x)));
      Host x = random(t, c.x, -3, 5, seed++);
      Host scale = random(DType::F32, c.scale, 0.5, 1.5, seed++);
      Host bias = random(t, c.bias.empty() ? std::vector<int64_t>{1} : c.bias,
                         -1, 1, seed++);
      bool hasBias = !c.bias.empty();
      Host want(t, c.x);
      ASSERT_OK(cpuk::layerNorm(x, scale, hasBias ? &bias.ref : nullptr, c.axis,
                                1e-5f, want));
      Dev dx(x), ds(scale), db(bias), dout(t, c.x);
      ASSERT_OK(cuk::layerNorm(dx, ds, hasBias ? db.ptr() : nullptr, c.axis,
                               1e-5f, dout));
      expectTol(dout, want, true);
    }
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{4, 16}, {3, 5, 32}, {2, 700}}) {
      SCOPED_TRACE(std::string("rms_norm ") + name(t));
      Host x = random(t, shape, -3, 3, seed++);
      Host scale = random(t, {shape.back()}, 0.5, 1.5, seed++), want(t, shape);
      ASSERT_OK(cpuk::rmsNorm(x, scale, 1e-6f, want));
      Dev dx(x), ds(scale), dout(t, shape);
      ASSERT_OK(cuk::rmsNorm(dx, ds, 1e-6f, dout));
      expectTol(dout, want, true);
    }
    {
      SCOPED_TRACE(std::string("batch_norm ") + name(t));
      Host x = random(t, {2, 3, 4, 5}, -3, 3, seed++), want(t, {2, 3, 4, 5});
      Host sc = random(DType::F64, {3}, 0.5, 1.5, seed++);
      Host bi = random(t, {3}, -1, 1, seed++);
      Host mu = random(DType::F32, {3}, -1, 1, seed++);
      Host var = random(DType::F32, {3}, 0.5, 2, seed++);
      ASSERT_OK(cpuk::batchNorm(x, sc, bi, mu, var, 1e-5f, want));
      Dev dx(x), dsc(sc), dbi(bi), dmu(mu), dvar(var), dout(t, {2, 3, 4, 5});
      ASSERT_OK(cuk::batchNorm(dx, dsc, dbi, dmu, dvar, 1e-5f, dout));
      expectTol(dout, want, true);
    }
  }
}

TEST_F(Cuda, CrossEntropy) {
  using Red = cuk::Reduction;
  unsigned seed = 150;
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (DType lt : {DType::I64, DType::I32})
      for (Red red : {Red::None, Red::Sum, Red::Mean})
        for (bool weighted : {false, true})
          for (std::vector<int64_t> shape :
               {std::vector<int64_t>{6, 10}, {2, 3, 10}, {4, 3000}}) {
            SCOPED_TRACE(std::string(name(t)) + " labels " + name(lt) +
                         " reduction " + std::to_string(int(red)) +
                         (weighted ? " weighted " : " ") +
                         smp::base::describe(make(t, shape)));
            int64_t classes = shape.back();
            std::vector<int64_t> lshape(shape.begin(), shape.end() - 1);
            Host logits = random(t, shape, -4, 4, seed++);
            Host labels = random(lt, lshape, 0, double(classes), seed++);
            labels.set(1, -100); // ignored
            Host w = random(DType::F32, {classes}, 0.2, 2, seed++);
            std::vector<int64_t> oshape =
                red == Red::None ? lshape : std::vector<int64_t>{};
            Host want(t, oshape);
            ASSERT_OK(cpuk::crossEntropy(logits, labels, -100,
                                         static_cast<cpuk::Reduction>(red),
                                         want, weighted ? &w.ref : nullptr));
            Dev dl(logits), dlab(labels), dw(w), dout(t, oshape);
            ASSERT_OK(cuk::crossEntropy(dl, dlab, -100, red, dout,
                                        weighted ? dw.ptr() : nullptr));
            expectTol(dout, want, true);
          }
  // Every label ignored: Mean is NaN (0 / 0) as on the CPU.
  Host logits = random(DType::F32, {3, 4}, -1, 1, 7);
  Host labels = make(DType::I64, {3}, {-100, -100, -100}), want(DType::F32, {});
  ASSERT_OK(cpuk::crossEntropy(logits, labels, -100, cpuk::Reduction::Mean, want));
  Dev dl(logits), dlab(labels), dout(DType::F32, {});
  ASSERT_OK(cuk::crossEntropy(dl, dlab, -100, Red::Mean, dout));
  expectTol(dout, want, true);
  // -inf logits (masked classes) add nothing to a row's one-pass sum, the
  // row's largest last or first, as on the CPU.
  Host masked = random(DType::F32, {3, 2000}, -3, 3, 9);
  for (int64_t c = 0; c < 2000; c += 3)
    masked.set(c, -INFINITY);
  for (int64_t c = 0; c < 2000; ++c)
    masked.set(2000 + c, double(c) / 100); // rising: the max grows each time
  masked.set(4000, 50);
  Host mlab = make(DType::I64, {3}, {1, 1999, 0}), mwant(DType::F32, {3});
  ASSERT_OK(
      cpuk::crossEntropy(masked, mlab, -100, cpuk::Reduction::None, mwant));
  Dev dm(masked), dml(mlab), dmout(DType::F32, {3});
  ASSERT_OK(cuk::crossEntropy(dm, dml, -100, Red::None, dmout));
  expectTol(dmout, mwant);
}

TEST_F(Cuda, CrossEntropyBadLabelIsADeviceError) {
  Host logits = random(DType::F32, {3, 4}, -1, 1, 8);
  Host labels = make(DType::I64, {3}, {0, 4, 1});
  Dev dl(logits), dlab(labels), dout(DType::F32, {});
  ASSERT_OK(cuk::crossEntropy(dl, dlab, -100, cuk::Reduction::Mean, dout));
  expectDeviceError("cross_entropy: label 4 at position 1 is outside [0, 4)");
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

TEST_F(Cuda, ConvAndPools) {
  struct ConvCase {
    std::vector<int64_t> x, w, strides, pads, dil;
    int64_t group;
    bool bias;
  };
  const ConvCase convs[] = {
      {{2, 4, 7, 7}, {6, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 2, true},
      {{1, 3, 10}, {4, 3, 3}, {}, {}, {2}, 1, false},
      {{2, 3, 5, 6}, {5, 3, 1, 1}, {}, {}, {}, 1, true},
      {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, {}, 1, true},
  };
  unsigned seed = 210;
  for (DType t : {DType::F32, DType::F64, DType::F16})
    for (const ConvCase &c : convs) {
      SCOPED_TRACE(std::string("conv ") + name(t) + " " +
                   smp::base::describe(make(t, c.x)));
      Host x = random(t, c.x, -1, 1, seed++), w = random(t, c.w, -1, 1, seed++);
      Host b = random(DType::F32, {c.w[0]}, -1, 1, seed++);
      // Output shape from the CPU's formula (it checks the shape we give).
      std::vector<int64_t> out = windowOutShape(
          c.x, c.w[0], std::vector<int64_t>(c.w.begin() + 2, c.w.end()),
          c.strides, c.pads, c.dil);
      Host want(t, out);
      ASSERT_OK(cpuk::conv(x, w, c.bias ? &b.ref : nullptr, c.strides, c.pads,
                           c.dil, c.group, want));
      Dev dx(x), dw(w), db(b), dout(t, out);
      ASSERT_OK(cuk::conv(dx, dw, c.bias ? db.ptr() : nullptr, c.strides,
                          c.pads, c.dil, c.group, dout));
      expectTol(dout, want, true);
    }
  struct PoolCase {
    std::vector<int64_t> x, kernel, strides, pads, dil;
    bool ceil;
  };
  const PoolCase pools[] = {
      {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true},
      {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false},
      {{1, 2, 9}, {2}, {3}, {0, 1}, {2}, true},
      {{1, 1, 4, 4}, {2, 2}, {}, {}, {}, false},
  };
  for (DType t : {DType::F32, DType::BF16})
    for (const PoolCase &c : pools)
      for (int kind = 0; kind < 3; ++kind) { // max, avg, avg + pads
        SCOPED_TRACE(std::string("pool ") + std::to_string(kind) + " " +
                     name(t) + " " + smp::base::describe(make(t, c.x)));
        Host x = random(t, c.x, -2, 2, seed++);
        // The output size: try growing candidates until the CPU accepts one.
        std::vector<int64_t> out;
        Host want;
        for (int64_t extra = 0; extra < 2 && out.empty(); ++extra) {
          std::vector<int64_t> cand = windowOutShape(
              c.x, c.x[1], c.kernel, c.strides, c.pads, c.dil, c.ceil, extra);
          Host h(t, cand);
          Status s = kind == 0 ? cpuk::maxPool(x, c.kernel, c.strides, c.pads,
                                               c.dil, c.ceil, h)
                               : cpuk::avgPool(x, c.kernel, c.strides, c.pads,
                                               c.dil, c.ceil, kind == 2, h);
          if (s.ok()) {
            out = cand;
            want = h;
          }
        }
        ASSERT_FALSE(out.empty());
        Dev dx(x), dout(t, out);
        if (kind == 0)
          ASSERT_OK(cuk::maxPool(dx, c.kernel, c.strides, c.pads, c.dil, c.ceil,
                                 dout));
        else
          ASSERT_OK(cuk::avgPool(dx, c.kernel, c.strides, c.pads, c.dil, c.ceil,
                                 kind == 2, dout));
        expectTol(dout, want, true);
      }
}

} // namespace
} // namespace smp_cuda_test
