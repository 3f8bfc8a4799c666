//===- ReduceSoftmaxTest.cpp - reductions, softmax, log_softmax -----------===//

#include "TestUtil.h"

#include <limits>

namespace smp::kernels::cpu::test {
namespace {

/// Naive reduction in double: out holds the kept dims in order.
std::vector<double> refReduce(ReduceOp op, const Host &in,
                              const std::vector<int64_t> &axes,
                              std::vector<int64_t> &kept) {
  const auto &shape = in.ref.shape;
  std::vector<bool> red(shape.size(), false);
  for (int64_t a : axes)
    red[a < 0 ? a + shape.size() : a] = true;
  kept.clear();
  for (size_t d = 0; d < shape.size(); ++d)
    if (!red[d])
      kept.push_back(shape[d]);
  int64_t n = 1;
  for (int64_t d : kept)
    n *= d;
  std::vector<double> acc(static_cast<size_t>(n),
                          op == ReduceOp::Max ? -INFINITY : 0.0);
  std::vector<int64_t> cnt(static_cast<size_t>(n), 0);
  for (int64_t k = 0; k < in.numel(); ++k) {
    auto idx = unravel(k, shape);
    std::vector<int64_t> kidx;
    for (size_t d = 0; d < shape.size(); ++d)
      if (!red[d])
        kidx.push_back(idx[d]);
    int64_t o = ravel(kidx, kept);
    double v = in.get(k);
    acc[o] = op == ReduceOp::Max ? std::max(acc[o], v) : acc[o] + v;
    ++cnt[o];
  }
  if (op == ReduceOp::Mean)
    for (int64_t o = 0; o < n; ++o)
      acc[o] /= static_cast<double>(cnt[o]);
  return acc;
}

struct ReduceCase {
  std::vector<int64_t> shape, axes;
};
const ReduceCase kReduceCases[] = {
    {{4, 6}, {1}},
    {{4, 6}, {0}},
    {{4, 6}, {0, 1}},
    {{3, 4, 5}, {1}},
    {{3, 4, 5}, {0, 2}},
    {{3, 4, 5}, {-1}},
    {{2, 3, 4, 5}, {1, 3}},
    {{2, 1, 4, 5}, {0, 1}},
    {{5}, {0}},
    {{3, 4, 5}, {}},
    {{2, 3, 4, 5}, {0, 2, 3}},
    {{64, 300}, {1}},
    {{300, 64}, {0}}, // parallel rows / columns
};

TEST(Reduce, MatchesReferenceForEveryAxisSet) {
  unsigned seed = 1;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max})
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
      for (const ReduceCase &c : kReduceCases) {
        Host in = random(t, c.shape, -2, 2, seed++);
        std::vector<int64_t> kept;
        std::vector<double> want = refReduce(op, in, c.axes, kept);
        SCOPED_TRACE(smp::base::describe(in) + " op " +
                     std::to_string(int(op)) + " axes " +
                     std::to_string(c.axes.size()));
        Host out(t, kept);
        ASSERT_OK(reduce(op, in, c.axes, out));
        double tol = t == DType::F32 ? 1e-6 : tolFor(t);
        expectNear(out.values(), want, tol, tol);
      }
}

TEST(Reduce, KeepdimsShapeAndIntegers) {
  Host in = make(DType::I32, {2, 3}, {1, -2, 3, 4, 5, -7});
  Host keep(DType::I32, {2, 1}), flat(DType::I32, {2});
  ASSERT_OK(reduce(ReduceOp::Sum, in, {1}, keep));
  expectNear(keep.values(), {2, 2}, 0);
  ASSERT_OK(reduce(ReduceOp::Mean, in, {1}, flat));
  expectNear(flat.values(), {0, 0}, 0); // 2/3 truncates
  ASSERT_OK(reduce(ReduceOp::Max, in, {1}, flat));
  expectNear(flat.values(), {3, 5}, 0);
  Host col(DType::I32, {1, 3});
  ASSERT_OK(reduce(ReduceOp::Sum, in, {0}, col));
  expectNear(col.values(), {5, 3, -4}, 0);
  Host b = make(DType::Bool, {2, 2}, {0, 0, 0, 1}), bo(DType::Bool, {2});
  ASSERT_OK(reduce(ReduceOp::Max, b, {1}, bo));
  expectNear(bo.values(), {0, 1}, 0);
  EXPECT_FALSE(reduce(ReduceOp::Sum, b, {1}, bo).ok());
  // Bad axes and shapes.
  EXPECT_FALSE(reduce(ReduceOp::Sum, in, {2}, flat).ok());
  EXPECT_FALSE(reduce(ReduceOp::Sum, in, {1, -1}, flat).ok());
  EXPECT_FALSE(reduce(ReduceOp::Sum, in, {1}, Host(DType::I32, {3})).ok());
}

TEST(Reduce, SumAccumulatesInDoubleAndMaxPropagatesNan) {
  // 2^24 + 2^20 ones: a float accumulator would lose every one.
  Host in(DType::F32, {(1 << 20) + 1});
  for (int64_t i = 0; i < in.numel(); ++i)
    in.as<float>()[i] = i == 0 ? 16777216.0f : 1.0f;
  Host out(DType::F32, {});
  ASSERT_OK(reduce(ReduceOp::Sum, in, {0}, out));
  EXPECT_EQ(out.get(0), 16777216.0 + (1 << 20));
  Host n = make(DType::F32, {2, 3}, {1, NAN, 2, 3, 4, 5}), m(DType::F32, {2});
  ASSERT_OK(reduce(ReduceOp::Max, n, {1}, m));
  EXPECT_TRUE(std::isnan(m.get(0)));
  EXPECT_EQ(m.get(1), 5);
  // Empty reductions: sum 0, max -inf.
  Host e(DType::F32, {3, 0}), es(DType::F32, {3});
  ASSERT_OK(reduce(ReduceOp::Sum, e, {1}, es));
  expectNear(es.values(), {0, 0, 0}, 0);
  ASSERT_OK(reduce(ReduceOp::Max, e, {1}, es));
  EXPECT_TRUE(std::isinf(es.get(0)) && es.get(0) < 0);
}

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

std::vector<double> refSoftmax(const Host &in, int64_t axis, bool log) {
  auto [outer, n, inner] = splitAtAxis(in.ref.shape, axis);
  std::vector<double> out(static_cast<size_t>(in.numel()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double m = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; ++i)
        m = std::max(m, in.get((o * n + i) * inner + j));
      for (int64_t i = 0; i < n; ++i)
        sum += std::exp(in.get((o * n + i) * inner + j) - m);
      for (int64_t i = 0; i < n; ++i) {
        double v = in.get((o * n + i) * inner + j) - m;
        out[(o * n + i) * inner + j] =
            log ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  return out;
}

TEST(Softmax, MatchesReferenceOnEveryAxis) {
  unsigned seed = 1;
  const std::vector<int64_t> shapes[] = {{7}, {3, 5}, {2, 3, 70}, {4, 129, 3}};
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (const auto &shape : shapes)
      for (int64_t axis = -1; axis < static_cast<int64_t>(shape.size()); ++axis)
        for (bool log : {false, true}) {
          Host in = random(t, shape, -20, 20, seed++);
          Host out(t, shape);
          SCOPED_TRACE(smp::base::describe(in) + " axis " +
                       std::to_string(axis) + (log ? " log" : ""));
          ASSERT_OK(log ? logSoftmax(in, axis, out) : softmax(in, axis, out));
          double tol = t == DType::F32 ? 4e-6 : tolFor(t);
          // log_softmax values reach -40: compare with an absolute tolerance
          // that scales with them.
          expectNear(out.values(), refSoftmax(in, axis, log), tol,
                     log ? tol * 8 : 1e-7);
        }
}

TEST(Softmax, KnownValuesAndStability) {
  Host x = make(DType::F32, {3}, {1, 2, 3}), y(DType::F32, {3});
  ASSERT_OK(softmax(x, 0, y));
  expectNear(y.values(),
             {0.09003057317038046, 0.24472847105479767, 0.6652409557748219},
             1e-6);
  ASSERT_OK(logSoftmax(x, -1, y));
  expectNear(y.values(),
             {-2.40760596444438, -1.40760596444438, -0.40760596444438}, 1e-6);
  // Huge logits do not overflow.
  Host big = make(DType::F32, {2}, {1000, 1000}), o(DType::F32, {2});
  ASSERT_OK(softmax(big, 0, o));
  expectNear(o.values(), {0.5, 0.5}, 1e-7);
  // A masked (-inf) entry gets probability 0; in place works.
  Host m = make(DType::F32, {2, 2}, {0, -INFINITY, 1, 1});
  ASSERT_OK(softmax(m, 1, m));
  expectNear(m.values(), {1, 0, 0.5, 0.5}, 1e-7);
  EXPECT_FALSE(softmax(x, 1, y).ok());
  EXPECT_FALSE(softmax(make(DType::I32, {3}), 0, make(DType::I32, {3})).ok());
}

//===----------------------------------------------------------------------===//
// Cumulative sum
//===----------------------------------------------------------------------===//

/// Cumulative sum in double, line by line (integers: exact for the small
/// values used).
std::vector<double> refCumSum(const Host &in, int64_t axis, bool exclusive,
                              bool reverse) {
  auto [outer, n, inner] = splitAtAxis(in.ref.shape, axis);
  std::vector<double> out(static_cast<size_t>(in.numel()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double sum = 0;
      for (int64_t step = 0; step < n; ++step) {
        int64_t k = (o * n + (reverse ? n - 1 - step : step)) * inner + j;
        double v = in.get(k);
        if (!exclusive)
          sum += v;
        out[k] = sum;
        if (exclusive)
          sum += v;
      }
    }
  return out;
}

TEST(CumSum, MatchesReferenceOnEveryAxisAndFlag) {
  // {1024, 96} is big enough to be split over the threads on either axis.
  const std::vector<int64_t> shapes[] = {{7}, {3, 4, 5}, {2, 1, 6}, {1024, 96}};
  unsigned seed = 60;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I8,
                  DType::I32, DType::I64, DType::U16, DType::U64})
    for (const auto &shape : shapes)
      for (int64_t axis = -1; axis < static_cast<int64_t>(shape.size());
           ++axis)
        for (int flags = 0; flags < 4; ++flags) {
          bool exclusive = flags & 1, reverse = flags & 2;
          SCOPED_TRACE(std::string(smp::base::dtypeName(t)) + " " +
                       smp::base::describe(Host(t, shape)) + " axis " +
                       std::to_string(axis) + (exclusive ? " exclusive" : "") +
                       (reverse ? " reverse" : ""));
          bool isInt = !smp::base::isFloat(t);
          // Integers small enough that no sum wraps (the big case only for
          // types wider than 8 bits).
          if (t == DType::I8 && shape[0] == 1024)
            continue;
          Host in = random(t, shape, isInt ? 0 : -2, isInt ? 3 : 2, seed++);
          Host out(t, shape);
          ASSERT_OK(cumsum(in, axis, exclusive, reverse, out));
          double tol = t == DType::F32 ? 1e-6 : tolFor(t);
          expectNear(out.values(), refCumSum(in, axis, exclusive, reverse),
                     tol, isInt ? 0 : tol);
        }
}

TEST(CumSum, KnownValuesInPlaceWrapAndErrors) {
  Host x = make(DType::I64, {2, 3}, {1, 2, 3, 4, 5, 6});
  Host o(DType::I64, {2, 3});
  ASSERT_OK(cumsum(x, 1, false, false, o));
  expectNear(o.values(), {1, 3, 6, 4, 9, 15}, 0);
  ASSERT_OK(cumsum(x, 0, true, true, o));
  expectNear(o.values(), {4, 5, 6, 0, 0, 0}, 0);
  ASSERT_OK(cumsum(x, -1, true, false, x)); // in place
  expectNear(x.values(), {0, 1, 3, 0, 4, 9}, 0);
  Host w = make(DType::I8, {2}, {100, 100}), wo(DType::I8, {2});
  ASSERT_OK(cumsum(w, 0, false, false, wo));
  expectNear(wo.values(), {100, -56}, 0); // wraps
  // Sums accumulate in double: 2^24 then ones stay exact in f32.
  Host f = make(DType::F32, {3}, {16777216.0, 1, 1}), fo(DType::F32, {3});
  ASSERT_OK(cumsum(f, 0, false, false, fo));
  expectNear(fo.values(), {16777216.0, 16777216.0, 16777218.0}, 0);
  Host e(DType::F32, {2, 0}), eo(DType::F32, {2, 0});
  ASSERT_OK(cumsum(e, 1, false, false, eo));
  smp::base::Status s = cumsum(make(DType::F32, {2, 3}), 2, false, false,
                               Host(DType::F32, {2, 3}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error, "cumsum: axis 2 out of range for rank 2");
  EXPECT_FALSE(
      cumsum(make(DType::F32, {}), 0, false, false, Host(DType::F32, {})).ok());
  EXPECT_FALSE(
      cumsum(make(DType::Bool, {2}), 0, false, false, Host(DType::Bool, {2}))
          .ok());
  EXPECT_FALSE(
      cumsum(make(DType::F32, {2}), 0, false, false, Host(DType::F64, {2}))
          .ok());
}

} // namespace
} // namespace smp::kernels::cpu::test
