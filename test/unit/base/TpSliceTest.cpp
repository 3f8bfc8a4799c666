//===- TpSliceTest.cpp - Tensor-parallel slices of a tensor ---------------===//

#include "smp/base/TpSlice.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using smp::base::copyTpSlice;
using smp::base::TpSliceSpec;
using smp::base::tpSliceDim;

namespace {

std::vector<int32_t> slice(const std::vector<int32_t> &whole,
                           const std::vector<int64_t> &shape,
                           const TpSliceSpec &spec) {
  std::vector<int64_t> sliced = shape;
  sliced[spec.dim] = tpSliceDim(shape[spec.dim], spec);
  size_t n = 1;
  for (int64_t d : sliced)
    n *= d;
  std::vector<int32_t> out(n, -1);
  copyTpSlice(reinterpret_cast<char *>(const_cast<int32_t *>(whole.data())),
              reinterpret_cast<char *>(out.data()), shape, spec,
              sizeof(int32_t), true);
  return out;
}

// A vocabulary of 5 rows over 2 ranks: 3 rows each, the last one zero.
TEST(TpSliceTest, RowsPastTheEndAreZeros) {
  std::vector<int32_t> whole = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; // [5, 2]
  EXPECT_EQ(tpSliceDim(5, {0, 1, 2, 0}), 3);
  EXPECT_EQ(slice(whole, {5, 2}, {0, 1, 2, 0}),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(slice(whole, {5, 2}, {0, 1, 2, 1}),
            (std::vector<int32_t>{6, 7, 8, 9, 0, 0}));
}

// A fused [q; k] projection (2 blocks) split over 2 ranks along dim 1: each
// rank takes its half of every block.
TEST(TpSliceTest, BlocksAreSplitEach) {
  std::vector<int32_t> whole = {0, 1, 2, 3, 4, 5, 6, 7}; // [1, 8]
  EXPECT_EQ(slice(whole, {1, 8}, {1, 2, 2, 0}),
            (std::vector<int32_t>{0, 1, 4, 5}));
  EXPECT_EQ(slice(whole, {1, 8}, {1, 2, 2, 1}),
            (std::vector<int32_t>{2, 3, 6, 7}));
}

TEST(TpSliceTest, SlicesJoinBackToTheWhole) {
  std::vector<int64_t> shape = {3, 5, 2};
  std::vector<int32_t> whole(30);
  for (int i = 0; i < 30; ++i)
    whole[i] = i + 1;
  std::vector<int32_t> joined(30, 0);
  for (int64_t r = 0; r < 2; ++r) {
    TpSliceSpec spec{1, 1, 2, r};
    std::vector<int32_t> part = slice(whole, shape, spec);
    copyTpSlice(reinterpret_cast<char *>(joined.data()),
                reinterpret_cast<char *>(part.data()), shape, spec,
                sizeof(int32_t), false);
  }
  EXPECT_EQ(joined, whole);
}

} // namespace
