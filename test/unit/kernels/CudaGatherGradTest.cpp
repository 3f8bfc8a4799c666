//===- CudaGatherGradTest.cpp - gather_grad's sums in a fixed order -------===//
//
// The CUDA gather_grad (kernels/cuda/GatherGrad.cu: the positions sorted by
// the row they gathered, each row's dy summed in position order, in double)
// gives the CPU's bytes, however often a row was gathered: an embedding's
// gradient with one row taking a third of the positions, over many tiles of
// the sort (three passes of the radix sort); a gathered axis of 5,000 rows
// (four) under leading dims; no positions at all; rows of more columns
// than a block has threads; 20,000 positions (the counts' scan takes
// several a thread). Atomic adds (the kernel before) summed f32 in
// f32 in the threads' order and failed here. Past 32-bit positions it
// refuses. gather_elements_grad and gather_nd_grad share the sort;
// gather_elements_grad's lines that fit sort in shared memory instead.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include <cmath>
#include <random>

namespace smp_cuda_test {
namespace {

/// dy with magnitudes from 2^-12 to 2^12, so that the order of a sum shows
/// in its last bits.
Host spreadValues(DType t, std::vector<int64_t> shape, unsigned seed) {
  Host h = random(t, std::move(shape), -1, 1, seed);
  std::mt19937 gen(seed + 1);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (int64_t i = 0; i < h.numel(); ++i)
    h.set(i, std::ldexp(h.get(i), exponent(gen)));
  return h;
}

/// count indices into dim rows: a third of them row `hot`, the rest
/// uniform, every tenth written as its negative alias (v - dim).
Host skewedIndices(DType t, int64_t count, int64_t dim, int64_t hot,
                   unsigned seed) {
  Host idx(t, {count});
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int64_t> row(0, dim - 1);
  for (int64_t k = 0; k < count; ++k) {
    int64_t v = k % 3 == 0 ? hot : row(gen);
    idx.set(k, k % 10 == 9 ? v - dim : v);
  }
  return idx;
}

/// A scatter-add gradient (gather_grad, gather_nd_grad, gather_elements_grad:
/// indices, dy, its axis or batch dims, out), the CPU's and the CUDA kernel.
using GradKernel = Status (*)(const TensorRef &, const TensorRef &, int64_t,
                              const TensorRef &);

/// The CUDA kernel gives the CPU's bytes for `indices` and `dy` into
/// `outShape`.
void expectTheCpusBytes(GradKernel cpu, GradKernel gpu, const Host &indices,
                        const Host &dy, int64_t arg,
                        const std::vector<int64_t> &outShape) {
  Host want(dy.ref.dtype, outShape);
  ASSERT_OK(cpu(indices, dy, arg, want));
  Dev di(indices), ddy(dy), dout(dy.ref.dtype, outShape);
  ASSERT_OK(gpu(di, ddy, arg, dout));
  expectSameBytes(dout, want);
}

TEST_F(Cuda, GatherGradIsTheCpusBitForBit) {
  struct Case {
    std::vector<int64_t> data; // out's shape
    int64_t axis, count, hot;
  };
  const Case cases[] = {
      {{300, 24}, 0, 5000, 7},      // an embedding: 20 tiles of the sort
      {{3, 5000, 2}, 1, 600, 4999}, // 13-bit keys: four passes
      {{5, 4}, 0, 0, 0},            // no positions: zeros
      {{6, 1100}, 0, 40, 2},        // rows wider than a block's threads
      {{100, 1}, 0, 20000, 5},      // 79 tiles: the scan's 1,264 counts
                                    // take 2 a thread
  };
  unsigned seed = 1700;
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(name(t)) + " " +
                   smp::base::describe(make(t, c.data)) + " axis " +
                   std::to_string(c.axis) + ", " + std::to_string(c.count) +
                   " positions");
      Host idx =
          skewedIndices(DType::I64, c.count, c.data[c.axis], c.hot, seed++);
      std::vector<int64_t> dyShape(c.data.begin(), c.data.begin() + c.axis);
      dyShape.push_back(c.count);
      dyShape.insert(dyShape.end(), c.data.begin() + c.axis + 1, c.data.end());
      expectTheCpusBytes(cpuk::gatherGrad, cuk::gatherGrad, idx,
                         spreadValues(t, dyShape, seed++), c.axis, c.data);
    }
}

/// gather_elements_grad and gather_nd_grad the same way (SortByKey.cuh):
/// a third of the elements adding into one place, over many tiles.
TEST_F(Cuda, GatherIndexedGradsAreTheCpusBitForBit) {
  unsigned seed = 1800;
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
    SCOPED_TRACE(name(t));
    // gather_elements over axis 1 of [7, 50]: 7 x 900 column indices.
    Host cols = skewedIndices(DType::I32, 7 * 900, 50, 3, seed++);
    cols.ref.shape = {7, 900};
    expectTheCpusBytes(cpuk::gatherElementsGrad, cuk::gatherElementsGrad, cols,
                       spreadValues(t, {7, 900}, seed++), 1, {7, 50});
    // gather_nd of 1,000 one-component tuples into rows of [600, 8].
    Host tuples = skewedIndices(DType::I64, 1000, 600, 599, seed++);
    tuples.ref.shape = {1000, 1};
    expectTheCpusBytes(cpuk::gatherNdGrad, cuk::gatherNdGrad, tuples,
                       spreadValues(t, {1000, 8}, seed++), 0, {600, 8});
  }
}

/// gather_elements_grad's lines sorted in shared memory (GatherIndexed.cu's
/// scatterLines: lines of 32 positions or more, under 5,000 positions and
/// places), on every axis, with data wider than the indices (places no
/// line reaches stay zero), lines of more positions than the block has
/// threads and of a ragged last 32 (33, 70, 300), a tenth of the indices
/// negative: the CPU's bytes. A line of 6,000 places runs the
/// global sort instead, also the CPU's bytes.
TEST_F(Cuda, GatherElementsGradByLinesIsTheCpusBitForBit) {
  struct Case {
    std::vector<int64_t> data, idx; // shapes
    int64_t axis;
  };
  const Case cases[] = {
      {{6, 40}, {6, 300}, 1},        // the last axis, skewed
      {{64, 5}, {70, 5}, 0},         // the first: lines strided by 5
      {{3, 50, 4}, {2, 33, 4}, 1},   // a middle axis, data wider
      {{2, 513, 3}, {2, 512, 3}, 1}, // DeBERTa's 512 x 512 lines, fewer
      {{4, 6000}, {4, 40}, 1},       // 6,040 > 5,000: the global sort
  };
  unsigned seed = 1900;
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(name(t)) + " " +
                   smp::base::describe(make(t, c.data)) + " axis " +
                   std::to_string(c.axis));
      int64_t count = 1;
      for (int64_t v : c.idx)
        count *= v;
      Host idx = skewedIndices(DType::I64, count, c.data[c.axis],
                               c.data[c.axis] / 2, seed++);
      idx.ref.shape = c.idx;
      expectTheCpusBytes(cpuk::gatherElementsGrad, cuk::gatherElementsGrad, idx,
                         spreadValues(t, c.idx, seed++), c.axis, c.data);
    }
}

/// An index out of range in a line is the device error naming it and its
/// position.
TEST_F(Cuda, GatherElementsGradByLinesReportsAnIndexOutOfRange) {
  Host idx = skewedIndices(DType::I32, 2 * 64, 10, 3, 1950);
  idx.ref.shape = {2, 64};
  idx.set(70, 10); // line 1, position 6
  Host dy = spreadValues(DType::F32, {2, 64}, 1951);
  Dev di(idx), ddy(dy), dout(DType::F32, {2, 10});
  ASSERT_OK(cuk::gatherElementsGrad(di, ddy, 1, dout));
  expectDeviceError("gather_elements_grad: index 10 at position 70 is out of "
                    "range for axis 1 of size 10");
}

/// The sort keeps positions and rows as 32-bit integers: more is refused
/// before anything runs (shapes only: the buffers are never read).
TEST_F(Cuda, GatherGradRefusesMoreThan32BitPositions) {
  Dev idx(DType::I64, {4}), dy(DType::F32, {4, 2}), out(DType::F32, {3, 2});
  TensorRef manyIdx = idx, manyDy = dy;
  manyIdx.shape = {int64_t(1) << 31};
  manyDy.shape = {int64_t(1) << 31, 2};
  Status s = cuk::gatherGrad(manyIdx, manyDy, 0, out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error, "gather_grad: 2147483648 positions adding into 3 "
                     "places: more than 2^31 - 2 of either is not supported "
                     "on the GPU");
}

} // namespace
} // namespace smp_cuda_test
