//===- LayoutTest.cpp - Parallel layouts: checks, cuts and joins ----------===//
//
// smp/base/Layout.h: the shapes a layout holds, the shards cut out of a
// tensor (hand-computed expectations for vocab padding and fused blocks),
// cut-then-paste round trips over every rank of a plan (tp x ZeRO with
// padding), and every refusal of checkLayout.
//
//===----------------------------------------------------------------------===//

#include "smp/base/Layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

using smp::base::checkLayout;
using smp::base::cutShard;
using smp::base::Layout;
using smp::base::localShape;
using smp::base::pasteShard;
using smp::base::tpSliceShape;

namespace {

using Shape = std::vector<int64_t>;

std::vector<int32_t> iota(size_t n, int32_t first = 1) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

const char *bytes(const std::vector<int32_t> &v) {
  return reinterpret_cast<const char *>(v.data());
}

std::vector<int32_t> cut(const std::vector<int32_t> &whole, const Layout &l) {
  std::vector<int32_t> out(smp::base::elementCount(localShape(l)), -1);
  cutShard(bytes(whole), l, sizeof(int32_t),
           reinterpret_cast<char *>(out.data()));
  return out;
}

Layout zeroChunk(Layout l, int64_t parts, int64_t index) {
  l.zeroShape = tpSliceShape(l);
  l.zeroParts = parts;
  l.zeroIndex = index;
  return l;
}

// A vocabulary of 5 rows over 2 ranks: 3 rows each, the last one zero.
TEST(LayoutTest, VocabRowsPastTheEndAreZeros) {
  std::vector<int32_t> whole = iota(10, 0); // [5, 2]
  Layout r0 = Layout::tpSliceOf({5, 2}, 0, 1, 2, 0);
  Layout r1 = Layout::tpSliceOf({5, 2}, 0, 1, 2, 1);
  EXPECT_EQ(localShape(r0), (Shape{3, 2}));
  EXPECT_EQ(checkLayout(r1, {3, 2}), "");
  EXPECT_EQ(cut(whole, r0), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(cut(whole, r1), (std::vector<int32_t>{6, 7, 8, 9, 0, 0}));
}

// A fused [q; k] projection (2 blocks) split over 2 ranks along dim 1: each
// rank takes its half of every block.
TEST(LayoutTest, BlocksAreSplitEach) {
  std::vector<int32_t> whole = iota(8, 0); // [1, 8]
  EXPECT_EQ(cut(whole, Layout::tpSliceOf({1, 8}, 1, 2, 2, 0)),
            (std::vector<int32_t>{0, 1, 4, 5}));
  EXPECT_EQ(cut(whole, Layout::tpSliceOf({1, 8}, 1, 2, 2, 1)),
            (std::vector<int32_t>{2, 3, 6, 7}));
}

// A ZeRO chunk of 7 elements over 3 ranks: 3 each, the last two padded.
TEST(LayoutTest, ZeroChunksArePadded) {
  std::vector<int32_t> whole = iota(7); // [7]
  Layout l = zeroChunk(Layout::wholeOf({7}), 3, 2);
  EXPECT_EQ(localShape(l), (Shape{3}));
  EXPECT_EQ(checkLayout(l, {3}), "");
  EXPECT_EQ(cut(whole, l), (std::vector<int32_t>{7, 0, 0}));
  EXPECT_EQ(cut(whole, zeroChunk(Layout::wholeOf({7}), 3, 1)),
            (std::vector<int32_t>{4, 5, 6}));
}

// A chunk of a tensor-parallel slice whose padded rows straddle chunks:
// [5, 2] over tp 2 (rank 1 holds rows 3, 4 and a zero row), then its 6
// elements over dp 4 (2 each, the last chunk all padding).
TEST(LayoutTest, ZeroChunkOfAPaddedSlice) {
  std::vector<int32_t> whole = iota(10, 0);
  Layout slice = Layout::tpSliceOf({5, 2}, 0, 1, 2, 1);
  EXPECT_EQ(cut(whole, zeroChunk(slice, 4, 1)), (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(cut(whole, zeroChunk(slice, 4, 2)), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(cut(whole, zeroChunk(slice, 4, 3)), (std::vector<int32_t>{0, 0}));
}

/// Cuts `whole` (of `full`) into every shard of tp `tp` (on `dim`, in
/// `blocks` blocks; tp 0: not split) x dp `dp` (dp > 0: ZeRO chunks) and pastes
/// them into a tensor of sentinels: the result is the tensor again.
void roundTrip(const Shape &full, int64_t dim, int64_t blocks, int64_t tp,
               int64_t dp) {
  size_t n = smp::base::elementCount(full);
  std::vector<int32_t> whole = iota(n), joined(n, -7);
  for (int64_t t = 0; t < std::max<int64_t>(tp, 1); ++t)
    for (int64_t d = 0; d < std::max<int64_t>(dp, 1); ++d) {
      Layout l = tp > 0 ? Layout::tpSliceOf(full, dim, blocks, tp, t)
                        : Layout::wholeOf(full);
      if (dp > 0)
        l = zeroChunk(l, dp, d);
      SCOPED_TRACE("tp " + std::to_string(t) + " dp " + std::to_string(d));
      ASSERT_EQ(checkLayout(l, localShape(l)), "");
      std::vector<int32_t> part = cut(whole, l);
      pasteShard(bytes(part), l, sizeof(int32_t),
                 reinterpret_cast<char *>(joined.data()));
    }
  EXPECT_EQ(joined, whole);
}

TEST(LayoutTest, ShardsJoinBackToTheWhole) {
  roundTrip({3, 5, 2}, 1, 1, 2, 0);  // tp 2 of 5 rows: padded
  roundTrip({4, 12}, 1, 3, 2, 0);    // fused QKV: 3 blocks over tp 2
  roundTrip({50, 3}, 0, 1, 4, 0);    // a vocabulary of 50 over tp 4
  roundTrip({7, 3}, 0, 1, 0, 4);     // ZeRO only: 21 elements over dp 4
  roundTrip({5, 2}, 0, 1, 2, 4);     // ZeRO of a padded tp slice
  roundTrip({2, 12, 3}, 1, 3, 2, 5); // ZeRO of a fused-blocks slice
  roundTrip({1}, 0, 1, 3, 2);        // more ranks than rows
}

TEST(LayoutTest, CheckRefusesWhatItCannotCut) {
  Layout whole = Layout::wholeOf({4, 6});
  EXPECT_EQ(checkLayout(whole, {4, 6}), "");
  EXPECT_EQ(checkLayout(whole, {6, 4}),
            "is a whole tensor but its global shape differs from its shape");
  EXPECT_EQ(checkLayout(whole, {-1}), "has an impossible shape");
  EXPECT_EQ(checkLayout(Layout::wholeOf({int64_t(1) << 40, 1 << 20}), {1}),
            "has an impossible global shape");

  Layout tp = Layout::tpSliceOf({4, 6}, 1, 1, 2, 1);
  EXPECT_EQ(checkLayout(tp, {4, 3}), "");
  EXPECT_EQ(checkLayout(tp, {4, 6}),
            "has a shape that is not its slice of the global tensor");
  Layout bad = tp;
  bad.tpDim = 2;
  EXPECT_EQ(checkLayout(bad, {4, 3}), "has an impossible tensor-parallel "
                                      "layout (dim 2, blocks 1, slice 1 of 2)");
  bad = tp;
  bad.tpIndex = 2;
  EXPECT_NE(checkLayout(bad, {4, 3}).find("impossible tensor-parallel"),
            std::string::npos);
  bad = tp;
  bad.tpBlocks = 0;
  EXPECT_NE(checkLayout(bad, {4, 3}).find("impossible tensor-parallel"),
            std::string::npos);
  bad = tp;
  bad.tpParts = int64_t(1) << 31;
  EXPECT_NE(checkLayout(bad, {4, 3}).find("impossible tensor-parallel"),
            std::string::npos);
  bad = whole;
  bad.tpDim = 1;
  EXPECT_EQ(checkLayout(bad, {4, 6}),
            "has tensor-parallel fields without tp_parts");

  Layout zero = zeroChunk(tp, 5, 4); // 12 elements over dp 5: 3 each
  EXPECT_EQ(checkLayout(zero, {3}), "");
  EXPECT_EQ(checkLayout(zero, {2}),
            "has a shape that is not its ZeRO chunk of the global tensor");
  bad = zero;
  bad.zeroShape = {4, 6}; // not the tp slice
  EXPECT_EQ(checkLayout(bad, {3}),
            "has a shape that is not its ZeRO chunk of the global tensor");
  bad = zero;
  bad.zeroIndex = int64_t(1) << 40;
  EXPECT_EQ(checkLayout(bad, {3}),
            "has an impossible ZeRO layout (chunk 1099511627776 of 5)");
  bad = zero;
  bad.zeroParts = -1;
  EXPECT_NE(checkLayout(bad, {3}).find("impossible ZeRO layout"),
            std::string::npos);
  bad = tp;
  bad.zeroIndex = 1;
  EXPECT_EQ(checkLayout(bad, {4, 3}), "has ZeRO fields without zero_parts");
}

} // namespace
