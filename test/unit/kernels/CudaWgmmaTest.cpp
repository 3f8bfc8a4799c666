//===- CudaWgmmaTest.cpp - Hopper's wgmma on its own
//-----------------------===//
//
// wgmmaProduct64 (smp/kernels/cuda/Wgmma.h): one warpgroup's 64 x 64 x 64
// product on wgmma.m64n64k16, bf16 and f16, A from shared memory or from
// registers, B K-major or MN-major, the operands laid out in shared memory
// along K first and along the rows first, against the
// product of the same rounded values in double. A descriptor whose leading
// and stride byte offsets were swapped, or an accumulator layout that is
// not the hardware's, gives O(1) errors (a failing MN-major case is run
// again with its descriptor's LBO and SBO exchanged, and the failure says
// whether that way is right: the one reading no GPU has checked yet); f32
// accumulation of 64 products of values in [-1, 1] stays within 1e-4. The GPU
// binary (smp-cuda-wgmma-tests, a process of its own) skips on a device other
// than compute capability 9.0; the emulator's (kernels/cudaemu/Wgmma.cpp) runs
// it in CI.
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include "smp/kernels/cuda/Wgmma.h"

namespace smp_cuda_test {
namespace {

using smp::kernels::cuda::WgmmaLayout;

TEST_F(Cuda, WgmmaProductMatchesTheHostProduct) {
  int device = 0, major = 0, minor = 0;
  CUDA_OK(cudaGetDevice(&device));
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                                 device));
  CUDA_OK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                                 device));
  if (major != 9 || minor != 0)
    GTEST_SKIP() << "wgmma needs compute capability 9.0, the device has "
                 << major << "." << minor;
  unsigned seed = 4100;
  for (DType t : {DType::BF16, DType::F16})
    for (WgmmaLayout layout : {WgmmaLayout::KFirst, WgmmaLayout::RowsFirst})
      for (int f = 0; f < 4; ++f) {
        smp::kernels::cuda::WgmmaForm form;
        form.aInRegisters = f & 1;
        form.bTransposed = f & 2;
        SCOPED_TRACE(
            std::string(name(t)) +
            (layout == WgmmaLayout::KFirst ? " K first" : " rows first") +
            (form.aInRegisters ? ", A in registers" : ", A shared") +
            (form.bTransposed ? ", B MN-major" : ", B K-major"));
        Host a = random(t, {64, 64}, -1, 1, seed++);
        Host b = random(t, {64, 64}, -1, 1, seed++);
        std::vector<double> want(64 * 64);
        for (int r = 0; r < 64; ++r)
          for (int c = 0; c < 64; ++c) {
            double sum = 0;
            for (int k = 0; k < 64; ++k)
              sum += a.get(r * 64 + k) *
                     b.get(form.bTransposed ? k * 64 + c : c * 64 + k);
            want[r * 64 + c] = sum;
          }
        Dev ga(a), gb(b), gd(DType::F32, {64, 64});
        auto product = [&](smp::kernels::cuda::WgmmaForm how) {
          EXPECT_OK(smp::kernels::cuda::wgmmaProduct64(
              ga.ref().data, gb.ref().data, static_cast<float *>(gd.ref().data),
              t == DType::BF16, layout, how));
          return gd.download().values();
        };
        auto worst = [&](const std::vector<double> &d) {
          double w = 0;
          for (size_t i = 0; i < d.size(); ++i)
            w = std::max(w, std::abs(d[i] - want[i]));
          return w;
        };
        std::vector<double> d = product(form);
        expectNear(d, want, 1e-5, 1e-4);
        if (form.bTransposed && worst(d) > 1e-3) { // which way is right?
          smp::kernels::cuda::WgmmaForm swapped = form;
          swapped.swapMnStrides = true;
          ADD_FAILURE() << (worst(product(swapped)) <= 1e-3
                                ? "with LBO and SBO exchanged the MN-major "
                                  "product is right: the hardware reads "
                                  "LBO along N; exchange wgmmaMnMajor's "
                                  "arguments (and the emulator's reading)"
                                : "nor with LBO and SBO exchanged");
        }
      }
}

} // namespace
} // namespace smp_cuda_test
