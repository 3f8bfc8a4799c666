//===- TensorTest.cpp - smp_base dtypes and fp16/bf16 conversions ---------===//

#include "smp/base/Tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace smp::base {
namespace {

TEST(Tensor, DTypeHelpers) {
  EXPECT_EQ(dtypeSize(DType::F16), 2u);
  EXPECT_EQ(dtypeSize(DType::Bool), 1u);
  EXPECT_EQ(dtypeSize(DType::U64), 8u);
  EXPECT_STREQ(dtypeName(DType::BF16), "bf16");
  EXPECT_TRUE(isFloat(DType::BF16));
  EXPECT_FALSE(isFloat(DType::I32));
  EXPECT_TRUE(isInteger(DType::U8));
  EXPECT_FALSE(isInteger(DType::Bool));
  EXPECT_TRUE(isSignedInteger(DType::I16));
  EXPECT_FALSE(isSignedInteger(DType::U16));
  TensorRef t;
  t.shape = {2, 3};
  t.dtype = DType::I64;
  EXPECT_EQ(describe(t), "2x3xi64");
  EXPECT_EQ(t.bytes(), 48u);
  t.shape = {};
  EXPECT_EQ(describe(t), "i64");
  EXPECT_EQ(t.numel(), 1);
}

TEST(Tensor, HalfRoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = halfToFloat(static_cast<uint16_t>(h));
    uint16_t back = floatToHalf(f);
    if (std::isnan(f))
      ASSERT_TRUE((back & 0x7c00) == 0x7c00 && (back & 0x3ff)) << h;
    else
      ASSERT_EQ(back, h) << h;
  }
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff); // rounds down
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00); // rounds to inf
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  // Ties go to even, also among subnormals.
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);
}

TEST(Tensor, Bf16Rounding) {
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    float f = bf16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f))
      ASSERT_EQ(floatToBf16(f), b) << b;
  }
  EXPECT_EQ(bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(floatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80); // tie
  EXPECT_EQ(floatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(floatToBf16(INFINITY), 0x7f80);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
  EXPECT_EQ(floatToBf16(3.4e38f), 0x7f80); // rounds past max to inf
}

// setElementFromDouble writes what elementAsDouble reads, for every dtype:
// 1.25 and -3 (wrapped for the unsigned types), the half types rounded.
TEST(Tensor, ElementsRoundTripThroughDouble) {
  const DType all[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                       DType::Bool, DType::U8,  DType::I8,  DType::I16,
                       DType::U16, DType::I32, DType::U32, DType::I64,
                       DType::U64};
  for (DType d : all) {
    alignas(8) unsigned char bytes[16] = {};
    TensorRef t{bytes, d, {2}};
    bool integral = !isFloat(d);
    setElementFromDouble(t, 0, 1.25);
    setElementFromDouble(t, 1, integral ? 7 : -3);
    EXPECT_EQ(elementAsDouble(t, 0), d == DType::Bool || integral ? 1 : 1.25)
        << dtypeName(d);
    EXPECT_EQ(elementAsDouble(t, 1), d == DType::Bool ? 1 : integral ? 7 : -3)
        << dtypeName(d);
  }
  alignas(8) unsigned char bytes[4] = {};
  setElementFromDouble(TensorRef{bytes, DType::BF16, {1}}, 0, 1.00390625);
  EXPECT_EQ(elementAsDouble(TensorRef{bytes, DType::BF16, {1}}, 0), 1.0)
      << "bf16 rounds to nearest even";
}

// smprun --check-finite's scan: NaN and infinities told apart in every float
// dtype (a 16-bit NaN has mantissa bits under the all-ones exponent), the
// first of each, and the multi-index its messages print.
TEST(Tensor, ScanNonFiniteTellsNanFromInf) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values = {1.0f, inf, -2.0f, nan, -inf, nan};
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    std::vector<char> bytes(values.size() * dtypeSize(dt));
    TensorRef t{bytes.data(), dt, {2, 3}};
    for (size_t k = 0; k < values.size(); ++k)
      setElementFromDouble(t, static_cast<int64_t>(k), values[k]);
    NonFiniteScan scan = scanNonFinite(t);
    EXPECT_EQ(scan.nans, 2) << dtypeName(dt);
    EXPECT_EQ(scan.infs, 2) << dtypeName(dt);
    EXPECT_EQ(scan.firstNan, 3) << dtypeName(dt);
    EXPECT_EQ(scan.firstInf, 1) << dtypeName(dt);
    EXPECT_FALSE(nonFinite(t, 2));
    EXPECT_TRUE(nonFinite(t, 4));
  }
  // The largest finite half values are finite.
  uint16_t halfMax = 0x7bff, bf16Max = 0x7f7f;
  EXPECT_EQ(scanNonFinite({&halfMax, DType::F16, {1}}).infs, 0);
  EXPECT_EQ(scanNonFinite({&bf16Max, DType::BF16, {1}}).infs, 0);
  // Integers hold no NaN.
  int32_t ints[2] = {-1, 0x7fc00000};
  EXPECT_EQ(scanNonFinite({ints, DType::I32, {2}}).nans, 0);
  EXPECT_EQ(indexString({2, 3}, 5), "[1, 2]");
  EXPECT_EQ(indexString({4}, 0), "[0]");
  EXPECT_EQ(indexString({}, 0), "[]");
}

} // namespace
} // namespace smp::base
