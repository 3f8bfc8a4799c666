//===- FusedGradTest.cpp - the backward's fused kernels --------------------===//
//
// smp-fuse-backward promises that its fused kernels give the unfused ops'
// bits: bias_gelu_grad == gelu_grad then reduce_sum over the leading dims,
// a norm gradient with a residual == the norm gradient then add. Checked
// byte for byte on shapes of one and of many row blocks, every float type,
// both vector paths; and reduce_sum over the leading dims (the row-block sum
// both share) against a long double reference.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"
#include "VecMath.h"
#include "smp/kernels/cpu/Training.h"

namespace smp::kernels::cpu::test {
namespace {

void expectSameBytes(const Host &got, const Host &want, const char *what) {
  ASSERT_EQ(got.bytes.size(), want.bytes.size()) << what;
  EXPECT_EQ(0, std::memcmp(got.bytes.data(), want.bytes.data(),
                           got.bytes.size()))
      << what;
}

std::vector<int64_t> leadingAxes(const std::vector<int64_t> &shape) {
  std::vector<int64_t> axes;
  for (size_t d = 0; d + 1 < shape.size(); ++d)
    axes.push_back(static_cast<int64_t>(d));
  return axes;
}

/// Shapes of one row block (21 rows), of many (600 and 4 x 128 rows) and
/// rows longer than the kernel's chunk (1100 columns).
const std::vector<std::vector<int64_t>> kShapes = {
    {3, 7, 40}, {600, 96}, {4, 128, 1100}, {1, 5}};

TEST(FusedGrad, BiasGeluGradIsGeluGradThenReduceSum) {
  for (bool simd : {true, false}) {
    detail::vecUseSimd(simd);
    for (DType t : {DType::F32, DType::BF16, DType::F64})
      for (bool tanhApprox : {true, false})
        for (const std::vector<int64_t> &shape : kShapes) {
          SCOPED_TRACE(::testing::Message()
                       << "simd " << simd << " dtype " << int(t) << " tanh "
                       << tanhApprox << " rank " << shape.size() << " last "
                       << shape.back());
          Host x = random(t, shape, -5, 5, 1), dy = random(t, shape, -1, 1, 2);
          Host dx(t, shape), db(t, {shape.back()});
          ASSERT_OK(biasGeluGrad(x, dy, tanhApprox, dx, db));
          Host wantDx(t, shape);
          std::vector<int64_t> kept(shape.size(), 1);
          kept.back() = shape.back();
          Host wantDb(t, kept);
          ASSERT_OK(geluGrad(x, dy, tanhApprox, wantDx));
          ASSERT_OK(reduce(ReduceOp::Sum, wantDx, leadingAxes(shape), wantDb));
          expectSameBytes(dx, wantDx, "dx");
          expectSameBytes(db, wantDb, "dbias");
        }
  }
  detail::vecUseSimd(true);
}

TEST(FusedGrad, BiasGeluGradRefusesABiasOfAnotherWidth) {
  Host x = random(DType::F32, {4, 8}, -1, 1, 3), dx(DType::F32, {4, 8});
  Host db(DType::F32, {4});
  Status s = biasGeluGrad(x, x, true, dx, db);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("one element per column"), std::string::npos)
      << s.error;
}

/// smp-fuse-matmul-bias's CPU kernel, byte for byte: f32/f64 as matmul then
/// binary(Add); f16/bf16 as cuBLASLt's epilogue computes, the f32 product
/// of the widened operands plus the widened bias, rounded once (= the f32
/// pair on cast copies, then a cast). The bias [N] or [1, .., 1, N];
/// folded, batched and broadcast products; both vector paths. A bias of
/// another width, an integer product and a rank-1 rhs are refused by name.
/// The products the epilogue tests run: folded (a transposed rhs),
/// plain, batched, broadcast, and an empty sum.
struct ProductCase {
  std::vector<int64_t> a, b, out;
  bool tb;
};
const std::vector<ProductCase> kProductCases = {
    {{3, 7, 40}, {96, 40}, {3, 7, 96}, true},
    {{600, 96}, {96, 24}, {600, 24}, false},
    {{4, 5, 7}, {4, 7, 3}, {4, 5, 3}, false},
    {{5, 7}, {2, 7, 3}, {2, 5, 3}, false},
    {{5, 0}, {0, 3}, {5, 3}, false}};

TEST(FusedGrad, MatMulBiasIsMatMulThenAdd) {
  for (bool simd : {true, false}) {
    detail::vecUseSimd(simd);
    for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64})
      for (const ProductCase &c : kProductCases)
        for (bool keepDims : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << "simd " << simd << " dtype " << int(t) << " out "
                       << c.out.size() << "d " << c.out.back() << " keep "
                       << keepDims);
          std::vector<int64_t> bs(keepDims ? c.out.size() : 1, 1);
          bs.back() = c.out.back();
          Host a = random(t, c.a, -1, 1, 4), b = random(t, c.b, -1, 1, 5);
          Host bias = random(t, bs, -3, 3, 6), got(t, c.out), want(t, c.out);
          ASSERT_OK(matmulBias(a, b, bias, got, false, c.tb));
          if (t == DType::F32 || t == DType::F64) {
            ASSERT_OK(matmul(a, b, want, false, c.tb));
            ASSERT_OK(binary(BinaryOp::Add, bias, want, want));
          } else {
            Host wa(DType::F32, c.a), wb(DType::F32, c.b),
                wbias(DType::F32, bs), wout(DType::F32, c.out);
            ASSERT_OK(cast(a, wa));
            ASSERT_OK(cast(b, wb));
            ASSERT_OK(cast(bias, wbias));
            ASSERT_OK(matmul(wa, wb, wout, false, c.tb));
            ASSERT_OK(binary(BinaryOp::Add, wbias, wout, wout));
            ASSERT_OK(cast(wout, want));
          }
          expectSameBytes(got, want, "out");
        }
  }
  detail::vecUseSimd(true);
  Host a = random(DType::F32, {4, 8}, -1, 1, 7), b = random(DType::F32, {8, 6}, -1, 1, 8);
  Host out(DType::F32, {4, 6});
  Status s = matmulBias(a, b, Host(DType::F32, {4}), out, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("one element per column"), std::string::npos) << s.error;
  Host ia(DType::I64, {4, 8}), ib(DType::I64, {8, 6}), io(DType::I64, {4, 6});
  s = matmulBias(ia, ib, Host(DType::I64, {6}), io, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("float"), std::string::npos) << s.error;
  Host v = random(DType::F32, {8}, -1, 1, 9), vo(DType::F32, {4});
  s = matmulBias(a, v, Host(DType::F32, {4}), vo, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("rank 2"), std::string::npos) << s.error;
}

/// smp.matmul_bias_add's CPU kernel, byte for byte: f32/f64 as matmul_bias
/// then binary(Add); f16/bf16 the f32 product of the widened operands plus
/// the widened bias, then the widened addend, rounded once (= the f32 ops
/// on cast copies, then a cast). An addend of another shape or dtype is
/// refused by name.
/// The reference of matmul_add (no bias) and matmul_bias_add: f32/f64 the
/// ops one after another; f16/bf16 the same f32 ops on widened copies, then
/// one cast (the kernels' one rounding).
Host productPlusAddend(const ProductCase &c, const Host &a, const Host &b,
                       const Host *bias, const Host &r) {
  DType t = a.ref.dtype;
  Host want(t, c.out);
  if (t == DType::F32 || t == DType::F64) {
    EXPECT_OK(matmul(a, b, want, false, c.tb));
    if (bias)
      EXPECT_OK(binary(BinaryOp::Add, want, *bias, want));
    EXPECT_OK(binary(BinaryOp::Add, want, r, want));
    return want;
  }
  auto widened = [](const Host &h) {
    Host w(DType::F32, h.ref.shape);
    EXPECT_OK(cast(h, w));
    return w;
  };
  Host wa = widened(a), wb = widened(b), wr = widened(r),
       wout(DType::F32, c.out);
  EXPECT_OK(matmul(wa, wb, wout, false, c.tb));
  if (bias)
    EXPECT_OK(binary(BinaryOp::Add, wout, widened(*bias), wout));
  EXPECT_OK(binary(BinaryOp::Add, wout, wr, wout));
  EXPECT_OK(cast(wout, want));
  return want;
}

/// smp.matmul_add's and smp.matmul_bias_add's CPU kernels, byte for byte:
/// f32/f64 as matmul, the bias's add, then the addend's; f16/bf16 the f32
/// product of the widened operands plus the widened bias and addend,
/// rounded once. An integer product, and an addend of another shape or
/// dtype, are refused by name.
TEST(FusedGrad, ProductPlusAddendIsTheOpsThenOneRounding) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64})
    for (const ProductCase &c : kProductCases)
      for (bool withBias : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "dtype " << int(t) << " out " << c.out.size() << "d "
                     << c.out.back() << " bias " << withBias);
        Host a = random(t, c.a, -1, 1, 14), b = random(t, c.b, -1, 1, 15);
        Host bias = random(t, {c.out.back()}, -3, 3, 16),
             r = random(t, c.out, -3, 3, 17), got(t, c.out);
        if (withBias)
          ASSERT_OK(matmulBiasAdd(a, b, bias, r, got, false, c.tb));
        else
          ASSERT_OK(matmulAdd(a, b, r, got, false, c.tb));
        expectSameBytes(
            got, productPlusAddend(c, a, b, withBias ? &bias : nullptr, r),
            "out");
      }
  Host a = random(DType::F32, {4, 8}, -1, 1, 7),
       b = random(DType::F32, {8, 6}, -1, 1, 8), out(DType::F32, {4, 6});
  Host bias = random(DType::F32, {6}, -1, 1, 9);
  Status s =
      matmulBiasAdd(a, b, bias, Host(DType::F32, {4, 1}), out, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("matmul_bias_add: addend"), std::string::npos)
      << s.error;
  s = matmulAdd(a, b, Host(DType::F64, {4, 6}), out, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("matmul_add: addend"), std::string::npos) << s.error;
  Host ia(DType::I64, {4, 8}), ib(DType::I64, {8, 6}), io(DType::I64, {4, 6});
  s = matmulAdd(ia, ib, io, io, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("matmul_add: needs float"), std::string::npos)
      << s.error;
}

/// Values k/16, |k| <= 16 * scale: exact in f16 and bf16, so the
/// products' f32 sums are exact in any order and the reference below is
/// the exact sum.
Host dyadic(DType t, std::vector<int64_t> shape, double scale, unsigned seed) {
  Host h = random(DType::F64, shape, -scale, scale, seed), out(t, shape);
  for (int64_t i = 0; i < h.numel(); ++i)
    out.set(i, std::round(h.get(i) * 16) / 16);
  return out;
}

/// The exact product (as [rows, n], the lhs [.., K] folded, rhs [K, n] or
/// transposed [n, K]) in double.
std::vector<double> exactProduct(const Host &a, const Host &b, bool tb,
                                 int64_t n) {
  int64_t k = a.ref.shape.back(), rows = a.numel() / k;
  std::vector<double> p(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t q = 0; q < k; ++q)
        p[r * n + j] += a.get(r * k + q) * b.get(tb ? j * k + q : q * n + j);
  return p;
}

double geluTanhOf(double x) {
  return 0.5 * x *
         (1 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}

/// `got` holds `want` (exact values) rounded to got's type: each element
/// within one unit in the last place of its rounding, and at most 2% of
/// them not the rounding itself (the kernels' f32 GELU is a 4-ulp
/// approximation, and loses digits below 1e-30 in the far negative tail:
/// an absolute 1e-6 there). The GELU of the rounded sum, or the erf GELU,
/// breaks the rounding of far more.
void expectRounded(const Host &got, const std::vector<double> &want) {
  Host rounded(got.ref.dtype, got.ref.shape);
  int64_t off = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    rounded.set(i, want[i]);
    double ulp = std::fabs(rounded.get(i)) *
                     (got.ref.dtype == DType::BF16 ? 1.0 / 128 : 1.0 / 1024) +
                 1e-6;
    if (got.get(i) != rounded.get(i)) {
      ++off;
      ASSERT_LE(std::fabs(got.get(i) - want[i]), ulp)
          << "element " << i << ": got " << got.get(i) << ", want " << want[i];
    }
  }
  EXPECT_LE(off, got.numel() / 50) << off << " of " << got.numel();
}

/// smp-fuse-gelu-epilogue's CPU kernels against the exact sums: forward,
/// the preactivation is the biased sum rounded once and the result the
/// tanh GELU of the unrounded sum rounded once; backward, the input
/// gradient is the product times gelu'(preactivation) rounded once and the
/// bias gradient its columns' sum as reduce_sum sums them. f16 and bf16,
/// folded and plain products, a transposed rhs, [N] and [1, 1, N] biases.
TEST(FusedGrad, GeluEpiloguesAreTheUnroundedProductsGelu) {
  struct Case {
    std::vector<int64_t> a, b;
    bool tb;
  };
  const Case cases[] = {{{3, 7, 40}, {96, 40}, true},
                        {{600, 96}, {96, 24}, false},
                        {{2, 5, 16}, {16, 8}, false}};
  unsigned seed = 40;
  for (DType t : {DType::F16, DType::BF16})
    for (const Case &c : cases) {
      int64_t n = c.tb ? c.b[0] : c.b[1];
      std::vector<int64_t> out = c.a;
      out.back() = n;
      std::vector<int64_t> bs(c.a.size() == 3 ? 3 : 1, 1);
      bs.back() = n;
      SCOPED_TRACE(::testing::Message() << "dtype " << int(t) << " out "
                                        << smp::base::describe(make(t, out)));
      Host a = dyadic(t, c.a, 1, seed++), b = dyadic(t, c.b, 1, seed++);
      Host bias = dyadic(t, bs, 2, seed++);
      std::vector<double> sum = exactProduct(a, b, c.tb, n);
      // Forward.
      Host result(t, out), pre(t, out);
      ASSERT_OK(matmulBiasGelu(a, b, bias, result, pre, false, c.tb));
      std::vector<double> biased(sum.size()), gelu(sum.size());
      for (size_t i = 0; i < sum.size(); ++i) {
        biased[i] = sum[i] + bias.get(static_cast<int64_t>(i % n));
        gelu[i] = geluTanhOf(biased[i]);
      }
      Host wantPre(t, out);
      for (int64_t i = 0; i < wantPre.numel(); ++i)
        wantPre.set(i, biased[i]);
      expectSameBytes(pre, wantPre, "preactivation");
      expectRounded(result, gelu);
      // Backward: the product is the output's gradient, pre the GELU's input.
      Host x = dyadic(t, out, 3, seed++), dx(t, out), db(t, bs);
      ASSERT_OK(matmulGeluGrad(a, b, x, dx, db, false, c.tb));
      std::vector<double> grad(sum.size());
      for (size_t i = 0; i < sum.size(); ++i) {
        double v = x.get(static_cast<int64_t>(i)), h = 1e-6;
        grad[i] = sum[i] * (geluTanhOf(v + h) - geluTanhOf(v - h)) / (2 * h);
      }
      expectRounded(dx, grad);
      Host wantDb(t, bs);
      ASSERT_OK(reduce(ReduceOp::Sum, dx, leadingAxes(out), wantDb));
      expectSameBytes(db, wantDb, "bias_grad");
    }
  // Refused by name: f32 operands, a preactivation of another shape, a bias
  // of another width.
  Host a = random(DType::F32, {4, 8}, -1, 1, 7),
       b = random(DType::F32, {8, 6}, -1, 1, 8);
  Host o(DType::F32, {4, 6});
  Status s = matmulBiasGelu(a, b, Host(DType::F32, {6}), o, o, false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("matmul_bias_gelu: takes f16 or bf16"),
            std::string::npos)
      << s.error;
  Host ha = random(DType::BF16, {4, 8}, -1, 1, 7),
       hb = random(DType::BF16, {8, 6}, -1, 1, 8), ho(DType::BF16, {4, 6});
  s = matmulGeluGrad(ha, hb, Host(DType::BF16, {4, 5}), ho,
                     Host(DType::BF16, {6}), false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("must have the output's shape"), std::string::npos)
      << s.error;
  s = matmulGeluGrad(ha, hb, ho, ho, Host(DType::BF16, {5}), false, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("matmul_gelu_grad: bias"), std::string::npos)
      << s.error;
}

/// smp-fuse-bias-grad's CPU kernel, byte for byte: the weight gradient is
/// matmul {transpose_lhs} and the bias gradient reduce_sum of lhs over its
/// rows ([N] or [1, N]); f16 and bf16, one and many row blocks. Operands
/// that are not [M, N] and [M, K], or a bias of another width, are refused.
TEST(FusedGrad, MatMulBiasGradIsMatMulAndReduceSum) {
  unsigned seed = 60;
  for (DType t : {DType::F16, DType::BF16})
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{16, 8, 24},
                           {600, 96, 40},
                           {3, 1100, 5}})
      for (bool keepDims : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "dtype " << int(t) << " " << m << "x" << n << "x" << k);
        Host g = random(t, {m, n}, -1, 1, seed++),
             x = random(t, {m, k}, -1, 1, seed++);
        std::vector<int64_t> bs =
            keepDims ? std::vector<int64_t>{1, n} : std::vector<int64_t>{n};
        Host w(t, {n, k}), b(t, bs), wantW(t, {n, k}), wantB(t, {1, n});
        ASSERT_OK(matmulBiasGrad(g, x, w, b));
        ASSERT_OK(matmul(g, x, wantW, true, false));
        ASSERT_OK(reduce(ReduceOp::Sum, g, {0}, wantB));
        expectSameBytes(w, wantW, "weight gradient");
        ASSERT_EQ(0, std::memcmp(b.bytes.data(), wantB.bytes.data(),
                                 static_cast<size_t>(n) * 2))
            << "bias gradient";
      }
  Host g = random(DType::BF16, {16, 8}, -1, 1, 1),
       x = random(DType::BF16, {12, 24}, -1, 1, 2), w(DType::BF16, {8, 24});
  Status s = matmulBiasGrad(g, x, w, Host(DType::BF16, {8}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("needs lhs [M, N] and rhs [M, K]"), std::string::npos)
      << s.error;
  Host x16 = random(DType::BF16, {16, 24}, -1, 1, 3);
  s = matmulBiasGrad(g, x16, w, Host(DType::BF16, {24}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("one element per column of lhs"), std::string::npos)
      << s.error;
}

/// smp-fuse-loss-casts: cross_entropy on f16/bf16 logits with an f32 loss
/// gives the bits of cross_entropy on their f32 copy, and cross_entropy_grad
/// written in the logits' type the bits of the f32 gradient then a cast;
/// both vector paths, rows of one and of many vector blocks, an ignored
/// label, each reduction.
TEST(FusedGrad, CrossEntropyOfSixteenBitLogitsIsThatOfItsF32Copy) {
  for (bool simd : {true, false}) {
    detail::vecUseSimd(simd);
    for (DType t : {DType::BF16, DType::F16})
      for (int64_t classes : {int64_t(7), int64_t(700), int64_t(5003)})
        for (Reduction red : {Reduction::None, Reduction::Sum, Reduction::Mean}) {
          SCOPED_TRACE(::testing::Message() << "simd " << simd << " dtype "
                                            << int(t) << " classes " << classes
                                            << " reduction " << int(red));
          int64_t rows = 6;
          Host x = random(t, {rows, classes}, -4, 4, 11);
          Host wide(DType::F32, {rows, classes});
          ASSERT_OK(cast(x, wide));
          Host labels(DType::I64, {rows});
          for (int64_t r = 0; r < rows; ++r)
            labels.ref.as<int64_t>()[r] = r == 3 ? -100 : (r * 37) % classes;
          std::vector<int64_t> lossShape;
          if (red == Reduction::None)
            lossShape = {rows};
          Host got(DType::F32, lossShape), want(DType::F32, lossShape);
          ASSERT_OK(crossEntropy(x, labels, -100, red, got));
          ASSERT_OK(crossEntropy(wide, labels, -100, red, want));
          expectSameBytes(got, want, "loss");
          Host g = red == Reduction::None ? random(DType::F32, {rows}, -1, 1, 12)
                                          : random(DType::F32, {}, 0.5, 1, 13);
          Host dx(t, {rows, classes}), dwide(DType::F32, {rows, classes}),
              wantDx(t, {rows, classes});
          ASSERT_OK(crossEntropyGrad(x, labels, nullptr, g, -100, red, dx));
          ASSERT_OK(crossEntropyGrad(wide, labels, nullptr, g, -100, red, dwide));
          ASSERT_OK(cast(dwide, wantDx));
          expectSameBytes(dx, wantDx, "dlogits");
        }
  }
  detail::vecUseSimd(true);
}

/// smp-fuse-sum-squares: sum_squares == the gradient norm's chain of
/// binary(Mul, x, x), reduce(Sum) over every dim and f32 adds in order,
/// byte for byte: tensors below and above reduce's blocked-run threshold
/// (2 x 16384), a scalar, an empty tensor; both vector paths (the mul's).
TEST(FusedGrad, SumSquaresIsTheNormsChain) {
  const std::vector<std::vector<int64_t>> shapes = {
      {3, 7}, {}, {300, 257}, {0, 4}, {40000}, {2, 3, 5}};
  for (bool simd : {true, false}) {
    detail::vecUseSimd(simd);
    SCOPED_TRACE(::testing::Message() << "simd " << simd);
    std::vector<Host> xs;
    std::vector<TensorRef> refs;
    for (size_t i = 0; i < shapes.size(); ++i)
      xs.push_back(random(DType::F32, shapes[i], -3, 3, 20 + unsigned(i)));
    for (const Host &x : xs)
      refs.push_back(x.ref);
    Host got(DType::F32, {}), want(DType::F32, {}), term(DType::F32, {});
    ASSERT_OK(sumSquares(refs, got));
    for (size_t i = 0; i < xs.size(); ++i) {
      Host sq(DType::F32, shapes[i]);
      ASSERT_OK(binary(BinaryOp::Mul, xs[i], xs[i], sq));
      std::vector<int64_t> axes;
      for (size_t d = 0; d < shapes[i].size(); ++d)
        axes.push_back(int64_t(d));
      ASSERT_OK(reduce(ReduceOp::Sum, sq, axes, i == 0 ? want : term));
      if (i > 0)
        ASSERT_OK(binary(BinaryOp::Add, want, term, want));
    }
    expectSameBytes(got, want, "sum of squares");
  }
  detail::vecUseSimd(true);
  Host x = random(DType::F64, {4}, -1, 1, 1), out(DType::F32, {});
  Status s = sumSquares({x.ref}, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("must be f32, f16 or bf16"), std::string::npos)
      << s.error;
  s = sumSquares({}, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("at least one input"), std::string::npos) << s.error;
}

/// smp-fuse-grad-casts: f16/bf16 inputs of sum_squares give the bits of
/// their f32 copies (among f32 inputs; the blocked runs of a long one too).
TEST(FusedGrad, SumSquaresOfSixteenBitInputsIsThatOfTheirF32Copies) {
  for (DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(smp::base::dtypeName(t));
    std::vector<Host> narrow = {random(t, {300, 257}, -3, 3, 40),
                                random(DType::F32, {7}, -3, 3, 41),
                                random(t, {40000}, -3, 3, 42)};
    std::vector<Host> wide;
    std::vector<TensorRef> nrefs, wrefs;
    for (const Host &x : narrow) {
      wide.emplace_back(DType::F32, x.ref.shape);
      ASSERT_OK(cast(x, wide.back()));
    }
    for (size_t i = 0; i < narrow.size(); ++i) {
      nrefs.push_back(narrow[i].ref);
      wrefs.push_back(wide[i].ref);
    }
    Host got(DType::F32, {}), want(DType::F32, {});
    ASSERT_OK(sumSquares(nrefs, got));
    ASSERT_OK(sumSquares(wrefs, want));
    expectSameBytes(got, want, "sum of squares");
  }
}

/// smp-fuse-grad-casts: adam_update (and sgd_update) of f32 states with an
/// f16/bf16 gradient gives the bits of the update with its f32 copy (both
/// SIMD paths; a size that is not a multiple of the widening chunk; in
/// place).
TEST(FusedGrad, OptimizersReadASixteenBitGradientAsItsF32Copy) {
  const int64_t n = 3001;
  AdamOptions o;
  o.weightDecay = 0.1;
  for (bool simd : {true, false})
    for (DType t : {DType::BF16, DType::F16}) {
      detail::vecUseSimd(simd);
      SCOPED_TRACE(::testing::Message() << smp::base::dtypeName(t) << " simd "
                                        << simd);
      Host p = random(DType::F32, {n}, -1, 1, 43), g = random(t, {n}, -1, 1, 44);
      Host m = random(DType::F32, {n}, -0.1, 0.1, 45);
      Host v = random(DType::F32, {n}, 0, 0.01, 46);
      Host g32(DType::F32, {n});
      ASSERT_OK(cast(g, g32));
      Host pw(DType::F32, {n}), mw(DType::F32, {n}), vw(DType::F32, {n});
      ASSERT_OK(adamUpdate(p, g32, m, v, 1e-3, 3, o, pw, mw, vw));
      ASSERT_OK(adamUpdate(p, g, m, v, 1e-3, 3, o, p, m, v)); // in place
      expectSameBytes(p, pw, "param");
      expectSameBytes(m, mw, "exp_avg");
      expectSameBytes(v, vw, "exp_avg_sq");
      // SGD with momentum the same way.
      SgdOptions so;
      so.momentum = 0.9;
      so.weightDecay = 0.01;
      Host q = random(DType::F32, {n}, -1, 1, 47), b(m), qw(DType::F32, {n}),
           bw(DType::F32, {n});
      ASSERT_OK(sgdUpdate(q, g32, b, 1e-2, 3, so, qw, bw));
      ASSERT_OK(sgdUpdate(q, g, b, 1e-2, 3, so, q, b));
      expectSameBytes(q, qw, "sgd param");
      expectSameBytes(b, bw, "sgd momentum buffer");
    }
  detail::vecUseSimd(true);
}

/// layer_norm_grad and rms_norm_grad with a residual against the kernel
/// without one followed by binary(Add); also with the residual in dx's own
/// memory (an in-place plan).
TEST(FusedGrad, NormGradResidualIsNormGradThenAdd) {
  for (DType t : {DType::F32, DType::BF16, DType::F64})
    for (const std::vector<int64_t> &shape : kShapes) {
      SCOPED_TRACE(::testing::Message() << "dtype " << int(t) << " rank "
                                        << shape.size() << " last "
                                        << shape.back());
      int64_t n = shape.back();
      Host x = random(t, shape, -3, 3, 4), dy = random(t, shape, -1, 1, 5);
      Host r = random(t, shape, -2, 2, 6), w = random(t, {n}, 0.5, 1.5, 7);
      int64_t axis = static_cast<int64_t>(shape.size()) - 1;
      for (bool rms : {false, true}) {
        auto run = [&](const TensorRef *res, Host &dx) {
          Host dw(t, {n}), db(t, {n});
          Status s = rms ? rmsNormGrad(x, w, dy, 1e-6f, dx, dw, res)
                         : layerNormGrad(x, w, dy, axis, 1e-5f, dx, dw, db,
                                         res);
          EXPECT_TRUE(s.ok()) << s.error;
          return std::make_pair(dw, db);
        };
        Host plain(t, shape), want(t, shape), fused(t, shape);
        auto [dw0, db0] = run(nullptr, plain);
        ASSERT_OK(binary(BinaryOp::Add, r, plain, want));
        auto [dw1, db1] = run(&r.ref, fused);
        expectSameBytes(fused, want, rms ? "rms dx" : "layer dx");
        expectSameBytes(dw1, dw0, "dscale");
        expectSameBytes(db1, db0, "dbias");
        Host inPlace(r); // residual and dx in one buffer
        run(&inPlace.ref, inPlace);
        expectSameBytes(inPlace, want, "in place");
      }
    }
}

TEST(FusedGrad, NormGradRefusesAResidualOfAnotherShape) {
  Host x = random(DType::F32, {4, 8}, -1, 1, 8), w = random(DType::F32, {8}, 1, 2, 9);
  Host dx(DType::F32, {4, 8}), dw(DType::F32, {8}), r(DType::F32, {8});
  Status s = rmsNormGrad(x, w, x, 1e-6f, dx, dw, &r.ref);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("residual"), std::string::npos) << s.error;
  EXPECT_NE(s.error.find("input's shape"), std::string::npos) << s.error;
}

/// reduce_sum over the leading dims in row blocks (many blocks here) against
/// a long double sum, with values that cancel.
TEST(FusedGrad, ReduceSumOverLeadingRowsMatchesLongDouble) {
  const std::vector<int64_t> shape = {3, 1700, 37};
  for (DType t : {DType::F32, DType::F64}) {
    Host x = random(t, shape, -1, 1, 10), y(t, {37});
    ASSERT_OK(reduce(ReduceOp::Sum, x, {0, 1}, y));
    Host mean(t, {1, 1, 37});
    ASSERT_OK(reduce(ReduceOp::Mean, x, {0, 1}, mean));
    std::vector<double> want(37), wantMean(37);
    for (int64_t j = 0; j < 37; ++j) {
      long double s = 0;
      for (int64_t r = 0; r < 3 * 1700; ++r)
        s += x.get(r * 37 + j);
      want[j] = static_cast<double>(s);
      wantMean[j] = static_cast<double>(s / (3 * 1700));
    }
    expectNear(y.values(), want, tolFor(t), 1e-12);
    expectNear(mean.values(), wantMean, tolFor(t), 1e-15);
  }
}

} // namespace
} // namespace smp::kernels::cpu::test
