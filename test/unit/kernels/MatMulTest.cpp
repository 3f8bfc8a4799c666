//===- MatMulTest.cpp - matmul against a naive numpy.matmul ---------------===//

#include "TestUtil.h"

namespace smp::kernels::cpu::test {
namespace {

/// numpy.matmul(op(a), op(b)) in double; returns the output shape too.
std::vector<double> refMatMul(const Host &a, const Host &b, bool ta, bool tb,
                              std::vector<int64_t> &outShape) {
  std::vector<int64_t> sa = a.ref.shape, sb = b.ref.shape;
  bool pa = sa.size() == 1, pb = sb.size() == 1;
  if (pa)
    sa.insert(sa.begin(), 1);
  if (pb)
    sb.push_back(1);
  size_t ra = sa.size(), rb = sb.size();
  int64_t M = ta ? sa[ra - 1] : sa[ra - 2], K = ta ? sa[ra - 2] : sa[ra - 1];
  int64_t N = tb ? sb[rb - 2] : sb[rb - 1];
  std::vector<int64_t> ba(sa.begin(), sa.end() - 2),
      bb(sb.begin(), sb.end() - 2);
  size_t rank = std::max(ba.size(), bb.size());
  std::vector<int64_t> batch(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - ba.size() ? 1 : ba[i - (rank - ba.size())];
    int64_t db = i < rank - bb.size() ? 1 : bb[i - (rank - bb.size())];
    batch[i] = std::max(da, db);
  }
  outShape = batch;
  if (!pa)
    outShape.push_back(M);
  if (!pb)
    outShape.push_back(N);
  int64_t nb = 1;
  for (int64_t d : batch)
    nb *= d;
  std::vector<double> out(static_cast<size_t>(nb * M * N));
  for (int64_t bi = 0; bi < nb; ++bi) {
    auto idx = unravel(bi, batch);
    int64_t offA = broadcastIndex(idx, ba) * sa[ra - 2] * sa[ra - 1];
    int64_t offB = broadcastIndex(idx, bb) * sb[rb - 2] * sb[rb - 1];
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          double x =
              a.get(offA + (ta ? k * sa[ra - 1] + i : i * sa[ra - 1] + k));
          double y =
              b.get(offB + (tb ? j * sb[rb - 1] + k : k * sb[rb - 1] + j));
          acc += x * y;
        }
        out[(bi * M + i) * N + j] = acc;
      }
  }
  return out;
}

struct Case {
  std::vector<int64_t> a, b;
  bool ta, tb;
};

const Case kCases[] = {
    {{5, 7}, {7, 3}, false, false},
    {{7, 5}, {7, 3}, true, false},
    {{5, 7}, {3, 7}, false, true},
    {{7, 5}, {3, 7}, true, true},
    {{2, 3, 4, 6}, {6, 5}, false, false},    // weight without batch
    {{2, 3, 6, 4}, {6, 5}, true, false},     // ... and transposed lhs
    {{3, 4, 6}, {2, 1, 6, 5}, false, false}, // batch broadcasting
    {{1, 4, 6}, {3, 5, 6}, false, true},     // attention-like q k^T
    {{7}, {7, 3}, false, false},             // rank-1 lhs
    {{4, 7}, {7}, false, false},             // rank-1 rhs
    {{7}, {7}, false, false},                // dot product
    {{2, 7}, {2, 3, 7}, false, true},
    {{7, 3}, {7}, true, false},         // rank-1 rhs, transposed lhs
    {{33, 70}, {70, 45}, false, false}, // larger than a kernel block
};

TEST(MatMul, MatchesNaiveReference) {
  unsigned seed = 1;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    for (const Case &c : kCases) {
      Host a = random(t, c.a, -1, 1, seed++), b = random(t, c.b, -1, 1, seed++);
      std::vector<int64_t> shape;
      std::vector<double> want = refMatMul(a, b, c.ta, c.tb, shape);
      SCOPED_TRACE(smp::base::describe(a) + " x " + smp::base::describe(b) +
                   (c.ta ? " ta" : "") + (c.tb ? " tb" : ""));
      Host o(t, shape);
      ASSERT_OK(matmul(a, b, o, c.ta, c.tb));
      double tol = t == DType::F32 ? 1e-5 : tolFor(t) * 4;
      expectNear(o.values(), want, tol, tol);
    }
  }
}

// Products large enough to be split over the threads (Gemm.cpp): by whole
// products, by rows and by columns, with and without transposes; one and two
// threads.
TEST(MatMul, ThreadSplitsMatchReference) {
  const Case cases[] = {
      {{3, 130, 96}, {3, 96, 90}, false, false}, // odd batch: row blocks
      {{3, 96, 130}, {96, 90}, true, false},     // ... transposed lhs
      {{3, 40, 96}, {3, 300, 96}, false, true},  // column blocks, rhs^T
      {{40, 96}, {96, 300}, false, false},       // one product by columns
      {{8, 64, 64}, {8, 64, 64}, false, false},  // whole products
      {{2, 3, 70, 64}, {2, 3, 64, 70}, false, false},
  };
  unsigned seed = 500;
  int before = numThreads();
  for (DType t : {DType::F32, DType::F64})
    for (const Case &c : cases) {
      Host a = random(t, c.a, -1, 1, seed++), b = random(t, c.b, -1, 1, seed++);
      std::vector<int64_t> shape;
      std::vector<double> want = refMatMul(a, b, c.ta, c.tb, shape);
      SCOPED_TRACE(smp::base::describe(a) + " x " + smp::base::describe(b));
      Host o2(t, shape), o1(t, shape);
      setNumThreads(2);
      ASSERT_OK(matmul(a, b, o2, c.ta, c.tb));
      setNumThreads(1);
      ASSERT_OK(matmul(a, b, o1, c.ta, c.tb));
      setNumThreads(before);
      double tol = t == DType::F32 ? 1e-5 : 1e-12;
      expectNear(o2.values(), want, tol, tol);
      expectNear(o1.values(), want, tol, tol);
    }
}

TEST(MatMul, Integers) {
  unsigned seed = 50;
  for (DType t : {DType::I32, DType::I64, DType::I8, DType::U16}) {
    for (const Case &c : kCases) {
      bool sign = smp::base::isSignedInteger(t);
      Host a = random(t, c.a, sign ? -3 : 0, 4, seed++);
      Host b = random(t, c.b, sign ? -3 : 0, 4, seed++);
      std::vector<int64_t> shape;
      std::vector<double> want = refMatMul(a, b, c.ta, c.tb, shape);
      if (t == DType::I8) // wraps modulo 256
        for (double &v : want)
          v = static_cast<double>(static_cast<int8_t>(static_cast<int64_t>(v)));
      Host o(t, shape);
      ASSERT_OK(matmul(a, b, o, c.ta, c.tb));
      expectNear(o.values(), want, 0);
    }
  }
}

TEST(MatMul, KnownValuesAndEdgeCases) {
  Host a = make(DType::F32, {2, 2}, {1, 2, 3, 4});
  Host b = make(DType::F32, {2, 2}, {5, 6, 7, 8});
  Host o(DType::F32, {2, 2});
  ASSERT_OK(matmul(a, b, o));
  expectNear(o.values(), {19, 22, 43, 50}, 0);
  ASSERT_OK(matmul(a, b, o, true, false));
  expectNear(o.values(), {26, 30, 38, 44}, 0);
  // K = 0 gives zeros; M = 0 gives nothing.
  Host e1(DType::F32, {3, 0}), e2(DType::F32, {0, 2});
  Host z = make(DType::F32, {3, 2}, {9, 9, 9, 9, 9, 9});
  ASSERT_OK(matmul(e1, e2, z));
  expectNear(z.values(), {0, 0, 0, 0, 0, 0}, 0);
  Host m0(DType::F32, {0, 4}), w(DType::F32, {4, 2}), o0(DType::F32, {0, 2});
  ASSERT_OK(matmul(m0, w, o0));
  // Errors: contraction mismatch, wrong output shape, mixed dtypes.
  EXPECT_FALSE(matmul(a, Host(DType::F32, {3, 2}), o).ok());
  EXPECT_FALSE(matmul(a, b, Host(DType::F32, {2, 3})).ok());
  EXPECT_FALSE(matmul(a, Host(DType::F64, {2, 2}), o).ok());
  EXPECT_FALSE(
      matmul(a, Host(DType::F32, {3, 2, 2}), Host(DType::F32, {2, 2})).ok());
}

} // namespace
} // namespace smp::kernels::cpu::test
