//===- CudaNormRowsTest.cpp - CUDA norms on rows held in registers -------===//
//
// f16/bf16 rows of 256 to 1,024 values (a transformer's hidden states),
// held in registers: the layer and RMS norms' gradients take one kernel for
// dx and the parameters' sums (normGradRowsSums, kernels/cuda/NormWarp.cuh)
// and the forward reads each row once (normRowsHeld); against the CPU
// kernels, with and without the residual (the bias), on blocks of 32 or 64
// rows with a tail and over 33 blocks.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

namespace smp_cuda_test {
namespace {

struct SumsCase {
  int64_t rows, n;
};

TEST_F(Cuda, NormGradientsSumTheirParametersInDxsPass) {
  unsigned seed = 1200;
  for (DType t : {DType::BF16, DType::F16})
    for (SumsCase c :
         {SumsCase{100, 768}, SumsCase{37, 256}, SumsCase{70, 1024},
          SumsCase{2100, 256}, SumsCase{40, 512}})
      for (bool residual : {false, true}) {
        SCOPED_TRACE(std::string(name(t)) + " " + std::to_string(c.rows) + "x" +
                     std::to_string(c.n) + (residual ? " residual" : ""));
        std::vector<int64_t> shape{c.rows, c.n}, ps{c.n};
        Host x = random(t, shape, -2, 3, seed++);
        Host scale = random(t, ps, 0.5, 1.5, seed++);
        Host dy = random(t, shape, -1, 1, seed++);
        Host res = random(t, shape, -1, 1, seed++);
        const TensorRef *hr = residual ? &res.ref : nullptr;
        Host dx(t, shape), ds(t, ps), db(t, ps);
        ASSERT_OK(cpuk::layerNormGrad(x, scale, dy, 1, 1e-5f, dx, ds, db, hr));
        Dev gx(x), gscale(scale), gdy(dy), gres(res), gdx(t, shape), gds(t, ps),
            gdb(t, ps);
        ASSERT_OK(cuk::layerNormGrad(gx, gscale, gdy, 1, 1e-5f, gdx, gds, gdb,
                                     residual ? gres.ptr() : nullptr));
        expectTol(gdx, dx, true);
        expectTol(gds, ds, true);
        expectTol(gdb, db, true);

        Host rdx(t, shape), rds(t, ps);
        ASSERT_OK(cpuk::rmsNormGrad(x, scale, dy, 1e-6f, rdx, rds, hr));
        Dev grdx(t, shape), grds(t, ps);
        ASSERT_OK(cuk::rmsNormGrad(gx, gscale, gdy, 1e-6f, grdx, grds,
                                   residual ? gres.ptr() : nullptr));
        expectTol(grdx, rdx, true);
        expectTol(grds, rds, true);
      }
}

/// The forward on the same rows (normRowsHeld: a lane's vectors held in
/// registers, 32 rows a block), with and without the bias, against the
/// CPU kernels.
TEST_F(Cuda, NormsHoldTheirRowsInRegisters) {
  unsigned seed = 1300;
  for (DType t : {DType::BF16, DType::F16})
    for (SumsCase c : {SumsCase{100, 768}, SumsCase{37, 256},
                       SumsCase{70, 1024}, SumsCase{40, 512}})
      for (bool withBias : {false, true}) {
        SCOPED_TRACE(std::string(name(t)) + " " + std::to_string(c.rows) + "x" +
                     std::to_string(c.n) + (withBias ? " bias" : ""));
        std::vector<int64_t> shape{c.rows, c.n}, ps{c.n};
        Host x = random(t, shape, -2, 3, seed++);
        Host scale = random(t, ps, 0.5, 1.5, seed++);
        Host bias = random(t, ps, -1, 1, seed++);
        Host y(t, shape), ry(t, shape);
        ASSERT_OK(cpuk::layerNorm(x, scale, withBias ? &bias.ref : nullptr, 1,
                                  1e-5f, y));
        ASSERT_OK(cpuk::rmsNorm(x, scale, 1e-6f, ry));
        Dev gx(x), gscale(scale), gbias(bias), gy(t, shape), gry(t, shape);
        ASSERT_OK(cuk::layerNorm(gx, gscale, withBias ? gbias.ptr() : nullptr,
                                 1, 1e-5f, gy));
        ASSERT_OK(cuk::rmsNorm(gx, gscale, 1e-6f, gry));
        expectTol(gy, y, true);
        expectTol(gry, ry, true);
      }
}

} // namespace
} // namespace smp_cuda_test
