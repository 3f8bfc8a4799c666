//===- CudaLossShardTest.cpp - CUDA cross_entropy_shard vs the CPU --------===//

#include "CudaTestUtil.h"

#include <limits>

namespace smp_cuda_test {
namespace {

/// Tensor parallelism's per-rank loss statistics and their gradient (in
/// place and not) against the CPU kernels, on rows wider than a block, a
/// shard with padding (NaN: read by neither) and one past the classes.
TEST_F(Cuda, CrossEntropyShardIsTheCpus) {
  unsigned seed = 440;
  int64_t rows = 5, width = 1300, classes = 3 * width - 700;
  for (DType t : {DType::F32, DType::BF16, DType::F64})
    for (int64_t k : {0, 2, 3}) { // whole, padded, past the classes
      SCOPED_TRACE(std::string(name(t)) + " shard " + std::to_string(k));
      DType st = t == DType::F64 ? DType::F64 : DType::F32;
      int64_t first = k * width;
      Host shard = random(t, {rows, width}, -6, 6, seed++);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < width; ++c)
          if (first + c >= classes)
            shard.set(r * width + c, std::numeric_limits<double>::quiet_NaN());
      Host labels = random(DType::I64, {rows}, 0, double(classes), seed++);
      labels.set(1, -100);
      labels.set(2, std::min(first + 5, classes - 1)); // in this shard
      Host offset = make(DType::I64, {}, {double(first)});
      Host stats(st, {rows, 2});
      ASSERT_OK(
          cpuk::crossEntropyShard(shard, labels, offset, classes, -100, stats));
      Dev dshard(shard), dlab(labels), doff(offset), dstats(st, {rows, 2});
      ASSERT_OK(
          cuk::crossEntropyShard(dshard, dlab, doff, classes, -100, dstats));
      expectTol(dstats, stats, true);
      Host g = random(st, {rows, 2}, -1, 1, seed++);
      Host want(t, {rows, width});
      ASSERT_OK(cpuk::crossEntropyShardGrad(shard, labels, offset, stats, g,
                                            classes, -100, want));
      Dev dst(stats), dg(g), dout(t, {rows, width});
      ASSERT_OK(cuk::crossEntropyShardGrad(dshard, dlab, doff, dst, dg, classes,
                                           -100, dout));
      expectTol(dout, want, true);
      ASSERT_OK(cuk::crossEntropyShardGrad(dshard, dlab, doff, dst, dg, classes,
                                           -100, dshard));
      expectTol(dshard, want, true);
    }
  // A label past the classes is a device error naming it.
  Host shard = random(DType::F32, {2, 8}, -1, 1, 9);
  Host labels = make(DType::I64, {2}, {3, 20});
  Dev dshard(shard), dlab(labels), doff(make(DType::I64, {}, {8})),
      dstats(DType::F32, {2, 2});
  ASSERT_OK(cuk::crossEntropyShard(dshard, dlab, doff, 16, -100, dstats));
  expectDeviceError("cross_entropy_shard: label 20 at position 1 is outside "
                    "[0, 16) and is not the ignore_index -100");
}

} // namespace
} // namespace smp_cuda_test
