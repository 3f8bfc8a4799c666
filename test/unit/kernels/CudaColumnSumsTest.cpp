//===- CudaColumnSumsTest.cpp - Column sums on 16-byte vectors ------------===//
//
// The f16/bf16 kernels that sum a [rows, n] matrix's columns over 16-byte
// vectors (kernels/cuda/ColumnSums.cuh) against the CPU kernels:
// bias_gelu_grad (a transformer's MLP: the product's gradient times GELU's
// derivative, and the bias gradient as the column sums in the same pass,
// biasGeluGradVec in Training.cu) and reduce_sum over the leading dims (a
// linear layer's bias gradient, reduceColumnsVec in Reduce.cu): one tile
// and many, a partial tile, rows split into chunks (the finish), rank 3,
// and the generic kernels where a row is not whole vectors.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace smp_cuda_test {
namespace {

TEST_F(Cuda, BiasGeluGradOnVectorsIsTheCpus) {
  unsigned seed = 1400;
  for (DType t : {DType::BF16, DType::F16})
    for (bool tanh : {true, false})
      for (std::vector<int64_t> shape : {std::vector<int64_t>{100, 3072},
                                         {2100, 96},
                                         {40, 264},
                                         {3, 5, 16},
                                         {9, 20}})
        for (bool inPlace : {false, true}) {
          SCOPED_TRACE(std::string(name(t)) + (tanh ? " tanh " : " erf ") +
                       smp::base::describe(make(t, shape)) +
                       (inPlace ? " in place" : ""));
          int64_t n = shape.back();
          Host x = random(t, shape, -4, 4, seed++);
          Host dy = random(t, shape, -1, 1, seed++);
          Host dx(t, shape), db(t, {n});
          ASSERT_OK(cpuk::biasGeluGrad(x, dy, tanh, dx, db));
          Dev gx(x), gdy(dy), gdx(t, shape), gdb(t, {n});
          const Dev &out = inPlace ? gdy : gdx;
          ASSERT_OK(cuk::biasGeluGrad(gx, gdy, tanh, out, gdb));
          expectTol(out, dx);
          expectTol(gdb, db, true);
        }
}

/// reduce_sum over every dim but the last (and reduce_mean, which keeps
/// the generic kernels), against the CPU's.
TEST_F(Cuda, ColumnSumsOnVectorsAreTheCpus) {
  unsigned seed = 1500;
  for (DType t : {DType::BF16, DType::F16})
    for (std::vector<int64_t> shape : {std::vector<int64_t>{100, 2304},
                                       {2100, 96},
                                       {600, 264},
                                       {3, 5, 16},
                                       {300, 20}})
      for (cuk::ReduceOp op : {cuk::ReduceOp::Sum, cuk::ReduceOp::Mean}) {
        SCOPED_TRACE(std::string(name(t)) + " " +
                     smp::base::describe(make(t, shape)) +
                     (op == cuk::ReduceOp::Sum ? " sum" : " mean"));
        std::vector<int64_t> axes(shape.size() - 1);
        for (size_t d = 0; d < axes.size(); ++d)
          axes[d] = static_cast<int64_t>(d);
        std::vector<int64_t> outShape{shape.back()};
        Host x = random(t, shape, -1, 1, seed++), want(t, outShape);
        ASSERT_OK(cpuk::reduce(static_cast<cpuk::ReduceOp>(op), x, axes, want));
        Dev gx(x), got(t, outShape);
        ASSERT_OK(cuk::reduce(op, gx, axes, got));
        expectTol(got, want);
      }
}

} // namespace
} // namespace smp_cuda_test
