//===- GatherIndexedTest.cpp - gather_nd, gather_elements and grads -------===//
//
// Each kernel against a naive reference written from the ONNX definitions
// (numpy's take_along_axis / GatherND's reference implementation), with
// batch dims, negative and repeated indices, several index dtypes, and the
// errors naming a bad index.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "smp/kernels/cpu/Training.h"

namespace smp::kernels::cpu::test {
namespace {

/// ONNX GatherND's reference: the flat data index of output element e.
int64_t ndSource(int64_t e, const std::vector<int64_t> &data,
                 const Host &idx, int64_t b) {
  const std::vector<int64_t> &is = idx.ref.shape;
  int64_t k = is.back();
  std::vector<int64_t> os(is.begin(), is.end() - 1);
  os.insert(os.end(), data.begin() + b + k, data.end());
  std::vector<int64_t> oi = unravel(e, os);
  std::vector<int64_t> src(oi.begin(), oi.begin() + b); // batch dims
  std::vector<int64_t> tuple(oi.begin(), oi.begin() + is.size() - 1);
  tuple.push_back(0);
  for (int64_t j = 0; j < k; ++j) {
    tuple.back() = j;
    int64_t v = static_cast<int64_t>(idx.get(ravel(tuple, is)));
    src.push_back(v < 0 ? v + data[b + j] : v);
  }
  src.insert(src.end(), oi.begin() + is.size() - 1, oi.end());
  return ravel(src, data);
}

/// torch.gather's definition: the flat data index of output element e.
int64_t elementSource(int64_t e, const std::vector<int64_t> &data,
                      const Host &idx, int64_t axis) {
  std::vector<int64_t> at = unravel(e, idx.ref.shape);
  int64_t v = static_cast<int64_t>(idx.get(e));
  at[axis] = v < 0 ? v + data[axis] : v;
  return ravel(at, data);
}

struct NdCase {
  std::vector<int64_t> data, indices;
  int64_t b;
};
const NdCase kNdCases[] = {
    {{2, 2}, {2, 2}, 0},          // ONNX example 1: elements
    {{2, 2}, {2, 1}, 0},          // example 2: rows
    {{2, 2, 2}, {2, 1, 2}, 0},    // example 4
    {{2, 2, 2}, {2, 1}, 1},       // example 5: batch_dims 1
    {{3, 4, 5}, {3, 6, 2}, 1},    // batch dim, tuples of 2, slices of 1
    {{8, 1, 8, 1}, {8, 1, 8, 1, 2}, 0}, // the HF mask (rank-5 tuples of 2)
    {{2, 3, 4, 5}, {2, 3, 7, 1}, 2},    // two batch dims
};

TEST(GatherNd, MatchesReference) {
  for (DType it : {DType::I64, DType::I32})
    for (DType t : {DType::F32, DType::F64, DType::F16, DType::I64})
      for (const NdCase &c : kNdCases) {
        SCOPED_TRACE(smp::base::dtypeName(t) + std::string(" b=") +
                     std::to_string(c.b));
        int64_t k = c.indices.back();
        Host idx(it, c.indices);
        std::mt19937 gen(7);
        for (int64_t i = 0; i < idx.numel(); ++i) {
          int64_t dim = c.data[c.b + i % k];
          idx.set(i, std::uniform_int_distribution<int64_t>(-dim, dim - 1)(gen));
        }
        Host data = random(t, c.data, -50, 50, 3);
        std::vector<int64_t> os(c.indices.begin(), c.indices.end() - 1);
        os.insert(os.end(), c.data.begin() + c.b + k, c.data.end());
        Host out(t, os);
        ASSERT_OK(gatherNd(data, idx, c.b, out));
        for (int64_t e = 0; e < out.numel(); ++e)
          ASSERT_EQ(out.get(e), data.get(ndSource(e, c.data, idx, c.b)));
        if (!smp::base::isFloat(t))
          continue;
        // The gradient: every output element's gradient added at its
        // source, repeated sources summed.
        Host dy = random(t, os, -1, 1, 5), dx(t, c.data);
        ASSERT_OK(gatherNdGrad(idx, dy, c.b, dx));
        std::vector<double> want(dx.numel(), 0.0);
        for (int64_t e = 0; e < dy.numel(); ++e)
          want[ndSource(e, c.data, idx, c.b)] += dy.get(e);
        expectNear(dx.values(), want, tolFor(t), tolFor(t));
      }
}

TEST(GatherElements, MatchesReference) {
  struct Case {
    std::vector<int64_t> data, indices;
    int64_t axis;
  };
  const Case cases[] = {{{2, 2}, {2, 2}, 1},       {{3, 3}, {2, 3}, 0},
                        {{3, 3}, {2, 3}, -2},      {{8, 40}, {8, 8}, 1},
                        {{2, 3, 4}, {2, 5, 3}, 1}, {{4}, {9}, 0}};
  for (DType it : {DType::I64, DType::I32, DType::I16})
    for (DType t : {DType::F32, DType::F64, DType::BF16, DType::I64})
      for (const Case &c : cases) {
        int64_t a = c.axis < 0 ? c.axis + int64_t(c.data.size()) : c.axis;
        Host idx = random(it, c.indices, -c.data[a], c.data[a], 11);
        Host data = random(t, c.data, -50, 50, 4);
        Host out(t, c.indices);
        ASSERT_OK(gatherElements(data, idx, c.axis, out));
        for (int64_t e = 0; e < out.numel(); ++e)
          ASSERT_EQ(out.get(e), data.get(elementSource(e, c.data, idx, a)));
        if (!smp::base::isFloat(t))
          continue;
        Host dy = random(t, c.indices, -1, 1, 6), dx(t, c.data);
        ASSERT_OK(gatherElementsGrad(idx, dy, c.axis, dx));
        std::vector<double> want(dx.numel(), 0.0);
        for (int64_t e = 0; e < dy.numel(); ++e)
          want[elementSource(e, c.data, idx, a)] += dy.get(e);
        // bf16 rounds the sum once (double accumulation).
        expectNear(dx.values(), want, tolFor(t), tolFor(t));
      }
}

TEST(GatherIndexed, ErrorsNameTheIndex) {
  Host data = random(DType::F32, {2, 3}, -1, 1, 1);
  Host out(DType::F32, {2});
  smp::base::Status s =
      gatherNd(data, make(DType::I64, {2, 2}, {1, 2, 1, 3}), 0, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error,
            "gather_nd: index 3 at position 3 is out of range for axis 1 of "
            "size 3");
  Host dx(DType::F32, {2, 3});
  s = gatherNdGrad(make(DType::I64, {2, 2}, {-3, 0, 0, 0}), out, 0, dx);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error, "gather_nd_grad: index -3 at position 0 is out of range "
                     "for axis 0 of size 2");
  Host o2(DType::F32, {2, 2});
  s = gatherElements(data, make(DType::I32, {2, 2}, {0, 1, 2, -4}), 1, o2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error, "gather_elements: index -4 at position 3 is out of range "
                     "for axis 1 of size 3");
  s = gatherElementsGrad(make(DType::I32, {2, 2}, {0, 1, 2, 2}), o2, 0, dx);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error, "gather_elements_grad: index 2 at position 2 is out of "
                     "range for axis 0 of size 2");
  // Shapes: a tuple longer than data's rank, batch dims that differ, an
  // indices dim larger than data's off the axis, a float index.
  s = gatherNd(data, make(DType::I64, {1, 3}, {0, 0, 0}), 0, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("the last dim of indices [1, 3] must be in [1, 2]"),
            std::string::npos)
      << s.error;
  s = gatherNd(data, make(DType::I64, {3, 1}, {0, 0, 0}), 1, out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("batch dim 0 differs"), std::string::npos) << s.error;
  Host o3(DType::F32, {1, 4});
  s = gatherElements(data, make(DType::I64, {1, 4}, {0, 0, 0, 0}), 0, o3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("exceed data [2, 3] in dim 1"), std::string::npos)
      << s.error;
  s = gatherElements(data, make(DType::F32, {2, 2}, {0, 0, 0, 0}), 0, o2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error.find("indices must be integers"), std::string::npos)
      << s.error;
}

} // namespace
} // namespace smp::kernels::cpu::test
