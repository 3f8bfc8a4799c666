//===- ShapeTest.cpp - smp_base strides and checked sizes -----------------===//

#include "smp/base/Shape.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace smp::base {
namespace {

TEST(Shape, ContiguousStrides) {
  EXPECT_EQ(contiguousStrides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(contiguousStrides({5}), (std::vector<int64_t>{1}));
  EXPECT_TRUE(contiguousStrides({}).empty());
  EXPECT_EQ(contiguousStrides({3, 0, 2}), (std::vector<int64_t>{0, 2, 1}));
}

TEST(Shape, CheckedMul) {
  int64_t out = 0;
  EXPECT_TRUE(checkedMul(int64_t(1) << 31, int64_t(1) << 31, out));
  EXPECT_EQ(out, int64_t(1) << 62);
  EXPECT_FALSE(checkedMul(int64_t(1) << 32, int64_t(1) << 31, out));
  EXPECT_FALSE(checkedMul(INT64_MIN, -1, out));
  EXPECT_TRUE(checkedMul(-3, 4, out));
  EXPECT_EQ(out, -12);
}

TEST(Shape, CheckedElementCount) {
  uint64_t n = 0;
  EXPECT_TRUE(checkedElementCount(std::vector<int64_t>{2, 3, 4}, 24, n));
  EXPECT_EQ(n, 24u);
  // One element over the limit, a negative dim, a product that would wrap.
  EXPECT_FALSE(checkedElementCount(std::vector<int64_t>{2, 3, 4}, 23, n));
  EXPECT_FALSE(checkedElementCount(std::vector<int64_t>{2, -1}, 1000, n));
  EXPECT_FALSE(checkedElementCount(
      std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40}, UINT64_MAX, n));
  // A scalar has one element; a zero dim none.
  EXPECT_TRUE(checkedElementCount(std::vector<int64_t>{}, 1, n));
  EXPECT_EQ(n, 1u);
  EXPECT_TRUE(checkedElementCount(std::vector<int32_t>{7, 0}, 100, n));
  EXPECT_EQ(n, 0u);
}

} // namespace
} // namespace smp::base
