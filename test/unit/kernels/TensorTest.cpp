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

} // namespace
} // namespace smp::kernels::cpu::test
