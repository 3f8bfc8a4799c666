//===- TensorTest.cpp - smprt dtypes and fp16/bf16 conversions ------------===//

#include "TestUtil.h"

namespace smp::kernels::cpu::test {
namespace {

TEST(Tensor, DTypeHelpers) {
  EXPECT_EQ(smprt::dtypeSize(DType::F16), 2u);
  EXPECT_EQ(smprt::dtypeSize(DType::Bool), 1u);
  EXPECT_EQ(smprt::dtypeSize(DType::U64), 8u);
  EXPECT_STREQ(smprt::dtypeName(DType::BF16), "bf16");
  EXPECT_TRUE(smprt::isFloat(DType::BF16));
  EXPECT_FALSE(smprt::isFloat(DType::I32));
  EXPECT_TRUE(smprt::isInteger(DType::U8));
  EXPECT_FALSE(smprt::isInteger(DType::Bool));
  EXPECT_TRUE(smprt::isSignedInteger(DType::I16));
  EXPECT_FALSE(smprt::isSignedInteger(DType::U16));
  TensorRef t;
  t.shape = {2, 3};
  t.dtype = DType::I64;
  EXPECT_EQ(smprt::describe(t), "2x3xi64");
  EXPECT_EQ(t.bytes(), 48u);
  t.shape = {};
  EXPECT_EQ(smprt::describe(t), "i64");
  EXPECT_EQ(t.numel(), 1);
}

TEST(Tensor, HalfRoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = smprt::halfToFloat(static_cast<uint16_t>(h));
    uint16_t back = smprt::floatToHalf(f);
    if (std::isnan(f))
      ASSERT_TRUE((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) << h;
    else
      ASSERT_EQ(back, h) << h;
  }
  EXPECT_EQ(smprt::halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(smprt::halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(smprt::halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(smprt::floatToHalf(65519.0f), 0x7bff); // rounds down
  EXPECT_EQ(smprt::floatToHalf(65520.0f), 0x7c00); // rounds to inf
  EXPECT_EQ(smprt::floatToHalf(-0.0f), 0x8000);
  // Ties go to even, also among subnormals.
  EXPECT_EQ(smprt::floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(smprt::floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(smprt::floatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(smprt::floatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);
}

TEST(Tensor, Bf16Rounding) {
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    float f = smprt::bf16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f))
      ASSERT_EQ(smprt::floatToBf16(f), b) << b;
  }
  EXPECT_EQ(smprt::bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(smprt::floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80); // tie
  EXPECT_EQ(smprt::floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(smprt::floatToBf16(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(smprt::bf16ToFloat(smprt::floatToBf16(NAN))));
  EXPECT_EQ(smprt::floatToBf16(3.4e38f), 0x7f80); // rounds past max to inf
}

TEST(Threads, SetNumThreadsKeepsResults) {
  Host a = random(DType::F32, {300, 200}, -1, 1, 1);
  Host o1(DType::F32, {300, 200}), o2(DType::F32, {300, 200});
  int before = numThreads();
  setNumThreads(1);
  EXPECT_EQ(numThreads(), 1);
  ASSERT_OK(softmax(a, 1, o1));
  setNumThreads(before);
  ASSERT_OK(softmax(a, 1, o2));
  EXPECT_EQ(o1.bytes, o2.bytes);
}

/// Every parallel loop gives the same bytes with 1 and 3 threads (chunk
/// boundaries land mid-row with 3).
TEST(Threads, ParallelLoopsMatchSerial) {
  Host x = random(DType::F32, {1000, 120}, -2, 2, 2);
  Host xi = random(DType::I32, {64, 64}, -5, 5, 3);
  Host cond = random(DType::Bool, {1000, 1}, 0, 2, 4);
  Host img = random(DType::F32, {1, 16, 32, 32}, -1, 1, 5);
  Host w = random(DType::F32, {8, 16, 3, 3}, -1, 1, 6);
  Host labels = random(DType::I64, {1000}, 0, 120, 7);
  Host idx = random(DType::I64, {500}, -1000, 1000, 8);
  Host scale = random(DType::F32, {120}, 0.5, 1.5, 9);
  auto runAll = [&] {
    std::vector<Host> outs;
    auto add = [&](DType t, std::vector<int64_t> shape) -> Host & {
      outs.emplace_back(t, std::move(shape));
      return outs.back();
    };
    outs.reserve(16);
    EXPECT_OK(reduce(ReduceOp::Sum, x, {1}, add(DType::F32, {1000})));
    EXPECT_OK(reduce(ReduceOp::Max, x, {0}, add(DType::F32, {120})));
    EXPECT_OK(
        layerNorm(x, scale, nullptr, 1, 1e-5f, add(DType::F32, {1000, 120})));
    EXPECT_OK(rmsNorm(x, scale, 1e-5f, add(DType::F32, {1000, 120})));
    Host x3 = x;
    x3.ref.shape = {10, 100, 120};
    EXPECT_OK(softmax(x3, 1, add(DType::F32, {10, 100, 120})));
    EXPECT_OK(transpose(x, {1, 0}, add(DType::F32, {120, 1000})));
    EXPECT_OK(cast(x, add(DType::BF16, {1000, 120})));
    EXPECT_OK(where(cond, x, scale, add(DType::F32, {1000, 120})));
    EXPECT_OK(gather(x, idx, 0, add(DType::F32, {500, 120})));
    EXPECT_OK(matmul(xi, xi, add(DType::I32, {64, 64})));
    EXPECT_OK(conv(img, w, nullptr, {}, {1, 1, 1, 1}, {}, 1,
                   add(DType::F32, {1, 8, 32, 32})));
    EXPECT_OK(avgPool(img, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, false, false,
                      add(DType::F32, {1, 16, 32, 32})));
    EXPECT_OK(crossEntropy(x, labels, -100, Reduction::None,
                           add(DType::F32, {1000})));
    EXPECT_OK(unary(UnaryOp::Gelu, x, add(DType::F32, {1000, 120})));
    return outs;
  };
  int before = numThreads();
  setNumThreads(1);
  std::vector<Host> serial = runAll();
  setNumThreads(3);
  std::vector<Host> parallel = runAll();
  setNumThreads(before);
  ASSERT_EQ(serial.size(), parallel.size());
  for (size_t i = 0; i < serial.size(); ++i)
    EXPECT_EQ(serial[i].bytes, parallel[i].bytes) << "output " << i;
}

} // namespace
} // namespace smp::kernels::cpu::test
