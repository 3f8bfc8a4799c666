//===- ShapeUtilsTest.cpp - Shape arithmetic ------------------------------===//

#include "smp/Dialect/Smp/IR/ShapeUtils.h"

#include <gtest/gtest.h>

using namespace smp;

TEST(ShapeUtils, BroadcastsNumpyStyle) {
  auto s = broadcastShapes({2, 1, 4}, {3, 1});
  ASSERT_TRUE(s);
  EXPECT_EQ(llvm::ArrayRef<int64_t>(*s), llvm::ArrayRef<int64_t>({2, 3, 4}));
  EXPECT_FALSE(broadcastShapes({2, 3}, {4}));
  auto scalar = broadcastShapes({}, {5});
  ASSERT_TRUE(scalar);
  EXPECT_EQ(scalar->size(), 1u);
}

TEST(ShapeUtils, NormalizesAxes) {
  EXPECT_EQ(normalizeAxis(-1, 3), 2);
  EXPECT_EQ(normalizeAxis(0, 3), 0);
  EXPECT_FALSE(normalizeAxis(3, 3));
  EXPECT_FALSE(normalizeAxis(-4, 3));
}

TEST(ShapeUtils, RefusesOverflowingAndNegativeShapes) {
  EXPECT_EQ(checkedNumElements({2, 3, 4}), 24);
  EXPECT_EQ(checkedNumElements({}), 1);
  EXPECT_EQ(checkedNumElements({0, int64_t(1) << 62}), 0);
  EXPECT_FALSE(checkedNumElements({int64_t(1) << 40, int64_t(1) << 40}));
  EXPECT_FALSE(checkedNumElements({2, -1}));
}

TEST(ShapeUtils, WindowSizesMatchPyTorch) {
  // torch.nn.MaxPool2d(2)(x[12]) -> 6; Conv 3x3 pad 1 keeps size.
  EXPECT_EQ(windowOutputSize(12, 2, 2, 0, 0, 1, false), 6);
  EXPECT_EQ(windowOutputSize(12, 3, 1, 1, 1, 1, false), 12);
  // ceil mode: 5 with k=2 s=2 -> 3 windows; floor -> 2.
  EXPECT_EQ(windowOutputSize(5, 2, 2, 0, 0, 1, true), 3);
  EXPECT_EQ(windowOutputSize(5, 2, 2, 0, 0, 1, false), 2);
  // Dilation 2 widens a 3-tap kernel to 5.
  EXPECT_EQ(windowOutputSize(7, 3, 1, 0, 0, 2, false), 3);
  EXPECT_FALSE(windowOutputSize(2, 3, 1, 0, 0, 1, false));
}

TEST(ShapeUtils, SliceLengths) {
  EXPECT_EQ(sliceLength(0, 10, 3), 4);
  EXPECT_EQ(sliceLength(9, -1, -1), 10);
  EXPECT_EQ(sliceLength(3, 3, 1), 0);
  EXPECT_EQ(sliceLength(5, 2, 1), 0);
}
