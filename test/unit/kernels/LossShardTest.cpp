//===- LossShardTest.cpp - cross_entropy_shard and its gradient ----------===//
//
// Tensor parallelism's vocabulary-parallel loss, one rank's part: the
// shards' statistics, combined as the compiler combines them over @tp,
// against the whole row's log-sum-exp and target logit in double; the
// gradient against its formula, in place and out of place. label_rank's
// shards against the rank of the label in the row sorted.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace smp::kernels::cpu::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Columns [first, first + width) of `full` [rows, classes], the columns
/// past `classes` NaN (padding no statistic may read).
Host shardOf(const Host &full, int64_t first, int64_t width) {
  int64_t rows = full.ref.shape[0], classes = full.ref.shape[1];
  Host s(full.ref.dtype, {rows, width});
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c)
      s.set(r * width + c,
            first + c < classes ? full.get(r * classes + first + c) : kNaN);
  return s;
}

TEST(CrossEntropyShard, ShardsCombineIntoTheWholeRowsLoss) {
  unsigned seed = 400;
  int64_t rows = 7, classes = 11, tp = 3, width = (classes + tp - 1) / tp;
  for (DType t : {DType::F32, DType::BF16, DType::F64}) {
    SCOPED_TRACE(smp::base::dtypeName(t));
    Host full = random(t, {rows, classes}, -5, 5, seed++);
    Host labels = random(DType::I64, {rows}, 0, double(classes), seed++);
    labels.set(3, -100);
    labels.set(5, classes - 1); // in the last shard, before its padding
    DType st = t == DType::F64 ? DType::F64 : DType::F32;
    std::vector<double> m(rows, -INFINITY), lse(rows, 0), target(rows, 0);
    std::vector<Host> stats;
    for (int64_t k = 0; k < tp; ++k) {
      Host shard = shardOf(full, k * width, width);
      Host offset = make(DType::I64, {}, {double(k * width)});
      stats.emplace_back(st, std::vector<int64_t>{rows, 2});
      ASSERT_OK(crossEntropyShard(shard, labels, offset, classes, -100,
                                  stats.back()));
      for (int64_t r = 0; r < rows; ++r) {
        m[r] = std::max(m[r], stats.back().get(2 * r));
        target[r] += stats.back().get(2 * r + 1);
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (const Host &h : stats)
        s += std::exp(h.get(2 * r) - m[r]);
      lse[r] = std::log(s) + m[r];
      // The whole row, in double from the same (rounded) values.
      double mx = -INFINITY, sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        mx = std::max(mx, full.get(r * classes + c));
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp(full.get(r * classes + c) - mx);
      EXPECT_NEAR(lse[r], std::log(sum) + mx, 1e-6 * std::abs(lse[r]))
          << "row " << r;
      double want = labels.get(r) == -100
                        ? 0.0
                        : full.get(r * classes + int64_t(labels.get(r)));
      EXPECT_EQ(target[r], want) << "row " << r;
    }
  }
}

TEST(CrossEntropyShard, GradientIsItsFormulaInPlaceToo) {
  unsigned seed = 420;
  int64_t rows = 6, classes = 10, width = 4, first = 8; // 2 valid, 2 padding
  for (DType t : {DType::F32, DType::BF16, DType::F64}) {
    SCOPED_TRACE(smp::base::dtypeName(t));
    DType st = t == DType::F64 ? DType::F64 : DType::F32;
    Host full = random(t, {rows, classes}, -4, 4, seed++);
    Host shard = shardOf(full, first, width);
    Host labels = make(DType::I64, {rows}, {8, 9, 0, -100, 9, 3});
    Host offset = make(DType::I64, {1}, {double(first)});
    Host stats(st, {rows, 2});
    ASSERT_OK(crossEntropyShard(shard, labels, offset, classes, -100, stats));
    Host g = random(st, {rows, 2}, -1, 1, seed++);
    Host dx(t, {rows, width});
    for (int64_t i = 0; i < dx.numel(); ++i)
      dx.set(i, 7); // not left as it was
    ASSERT_OK(crossEntropyShardGrad(shard, labels, offset, stats, g, classes,
                                    -100, dx));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c) {
        double want = 0;
        if (first + c < classes) {
          want = g.get(2 * r) *
                 std::exp(shard.get(r * width + c) - stats.get(2 * r));
          if (labels.get(r) == first + c)
            want += g.get(2 * r + 1);
        }
        double tol = t == DType::BF16 ? 8e-3 : 1e-6;
        EXPECT_NEAR(dx.get(r * width + c), want, tol * (1 + std::abs(want)))
            << "row " << r << " column " << c;
      }
    Host inPlace = shard; // the gradient over the logits: the same bits
    ASSERT_OK(crossEntropyShardGrad(inPlace, labels, offset, stats, g, classes,
                                    -100, inPlace));
    EXPECT_EQ(inPlace.values(), dx.values());
  }
}

TEST(CrossEntropyShard, AShardPastTheClassesHasNoLogSumExp) {
  // ceil(9/4) = 3 columns a rank: rank 3's first class is 9, past the 9.
  Host shard = make(DType::F32, {2, 3}, {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN});
  Host labels = make(DType::I64, {2}, {8, -100});
  Host offset = make(DType::I64, {}, {9});
  Host stats(DType::F32, {2, 2});
  ASSERT_OK(crossEntropyShard(shard, labels, offset, 9, -100, stats));
  EXPECT_EQ(stats.get(0), -INFINITY);
  EXPECT_EQ(stats.get(1), 0.0);
  Host g = make(DType::F32, {2, 2}, {0.5, -1, 0, 0});
  Host dx(DType::F32, {2, 3});
  ASSERT_OK(
      crossEntropyShardGrad(shard, labels, offset, stats, g, 9, -100, dx));
  EXPECT_EQ(dx.values(), std::vector<double>(6, 0.0));
}

TEST(CrossEntropyShard, RefusesWhatItCannotRead) {
  Host shard(DType::F32, {2, 4}), stats(DType::F32, {2, 2});
  Host offset = make(DType::I64, {}, {4});
  Host labels = make(DType::I64, {2}, {1, 10});
  EXPECT_EQ(crossEntropyShard(shard, labels, offset, 10, -100, stats).error,
            "cross_entropy_shard: label 10 at position 1 is outside [0, 10) "
            "and is not the ignore_index -100");
  Host g(DType::F32, {2, 2}), dx(DType::F32, {2, 4});
  EXPECT_EQ(crossEntropyShardGrad(shard, labels, offset, stats, g, 10, -100, dx)
                .error,
            "cross_entropy_shard_grad: label 10 at position 1 is outside "
            "[0, 10) and is not the ignore_index -100");
  labels = make(DType::I64, {2}, {1, 2});
  Host wide(DType::F64, {2, 2});
  EXPECT_NE(crossEntropyShard(shard, labels, offset, 10, -100, wide).error, "");
  Host two = make(DType::I64, {2}, {0, 4});
  EXPECT_EQ(crossEntropyShard(shard, labels, two, 10, -100, stats).error,
            "cross_entropy_shard: offset 2xi64 must hold one element");
  EXPECT_EQ(crossEntropyShard(shard, labels, offset, 0, -100, stats).error,
            "cross_entropy_shard: classes must be at least 1, not 0");
}

/// The rank of row r's label among `x`'s rows of `classes` (argmax order:
/// descending, ties by class; NaN first), by sorting the row's classes.
int64_t sortedRank(const Host &x, int64_t r, int64_t classes, int64_t label) {
  std::vector<int64_t> order(classes);
  for (int64_t c = 0; c < classes; ++c)
    order[c] = c;
  auto key = [&](int64_t c) { return x.get(r * classes + c); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    double xa = key(a), xb = key(b);
    if (std::isnan(xa) || std::isnan(xb))
      return std::isnan(xa) && !std::isnan(xb);
    return xa > xb;
  });
  return std::find(order.begin(), order.end(), label) - order.begin();
}

TEST(LabelRank, ShardsAddUpToTheSortedRowsRank) {
  unsigned seed = 470;
  int64_t rows = 9, classes = 11, tp = 3, width = (classes + tp - 1) / tp;
  for (DType t : {DType::F32, DType::BF16, DType::F64}) {
    SCOPED_TRACE(smp::base::dtypeName(t));
    // Few distinct values, so that ties are common (bf16 too).
    Host full = random(t, {rows, classes}, -2, 2, seed++);
    for (int64_t i = 0; i < rows * classes; ++i)
      full.set(i, std::round(full.get(i)));
    Host labels = random(DType::I64, {rows}, 0, double(classes), seed++);
    labels.set(3, -100);
    labels.set(5, classes - 1);
    full.set(6 * classes + 4, kNaN); // a NaN logit ranks first
    labels.set(7, 2);
    full.set(7 * classes + 2, kNaN); // a NaN label logit: last
    Host whole(DType::F32, {rows});
    ASSERT_OK(labelRank(full, labels, make(DType::I64, {}, {0}), nullptr,
                        classes, -100, whole));
    // The target logits as the vocabulary-parallel loss sums them.
    Host target(DType::F32, {rows});
    for (int64_t r = 0; r < rows; ++r) {
      int64_t y = static_cast<int64_t>(labels.get(r));
      target.set(r, y < 0 ? 0.0 : full.get(r * classes + y));
    }
    std::vector<double> summed(rows, 0.0);
    for (int64_t k = 0; k < tp; ++k) {
      Host shard = shardOf(full, k * width, width);
      Host part(DType::F32, {rows});
      ASSERT_OK(labelRank(shard, labels,
                          make(DType::I64, {}, {double(k * width)}),
                          &target.ref, classes, -100, part));
      for (int64_t r = 0; r < rows; ++r)
        summed[r] += part.get(r);
    }
    for (int64_t r = 0; r < rows; ++r) {
      int64_t y = static_cast<int64_t>(labels.get(r));
      double want = y < 0 ? 0.0
                    : std::isnan(full.get(r * classes + y))
                        ? double(classes)
                        : double(sortedRank(full, r, classes, y));
      EXPECT_EQ(whole.get(r), want) << "row " << r;
      EXPECT_EQ(summed[r], want) << "row " << r;
    }
  }
}

TEST(LabelRank, RefusesWhatItCannotRead) {
  Host x(DType::F32, {2, 4}), out(DType::F32, {2});
  Host offset = make(DType::I64, {}, {4});
  Host labels = make(DType::I64, {2}, {5, 10});
  EXPECT_EQ(labelRank(x, labels, offset, nullptr, 10, -100, out).error,
            "label_rank: label 10 at position 1 is outside [0, 10) and is not "
            "the ignore_index -100");
  labels = make(DType::I64, {2}, {5, 1});
  EXPECT_EQ(labelRank(x, labels, offset, nullptr, 10, -100, out).error,
            "label_rank: label 1 of row 1 is not in the shard's 4 classes "
            "from 4, and no target is given");
  Host target(DType::F32, {3}), wide(DType::F64, {2});
  EXPECT_NE(labelRank(x, labels, offset, &target.ref, 10, -100, out).error, "");
  EXPECT_NE(labelRank(x, labels, offset, nullptr, 10, -100, wide).error, "");
}

} // namespace
} // namespace smp::kernels::cpu::test
