//===- CudaLossShardTest.cpp - CUDA cross_entropy_shard vs the CPU --------===//

#include "CudaTestUtil.h"

#include <cmath>
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

/// label_rank against the CPU's on rows wider than a block, with ties, a
/// NaN, a shard with padding and given targets; a label outside the shard
/// without a target is a device error.
TEST_F(Cuda, LabelRankIsTheCpus) {
  unsigned seed = 480;
  int64_t rows = 6, width = 1300, classes = 3 * width - 700;
  for (DType t : {DType::F32, DType::BF16, DType::F64})
    for (int64_t k : {0, 2}) {
      SCOPED_TRACE(std::string(name(t)) + " shard " + std::to_string(k));
      int64_t first = k * width;
      Host shard = random(t, {rows, width}, -3, 3, seed++);
      for (int64_t i = 0; i < rows * width; ++i)
        shard.set(i, first + i % width >= classes
                         ? std::numeric_limits<double>::quiet_NaN()
                         : std::round(shard.get(i)));
      shard.set(4 * width + 7, std::numeric_limits<double>::quiet_NaN());
      Host labels = random(DType::I64, {rows}, 0, double(classes), seed++);
      labels.set(1, -100);
      Host target = random(DType::F32, {rows}, -3, 3, seed++);
      for (int64_t r = 0; r < rows; ++r)
        target.set(r, std::round(target.get(r)));
      target.set(3, std::numeric_limits<double>::quiet_NaN());
      Host offset = make(DType::I64, {}, {double(first)});
      Host want(DType::F32, {rows});
      ASSERT_OK(cpuk::labelRank(shard, labels, offset, &target.ref, classes,
                                -100, want));
      Dev dshard(shard), dlab(labels), doff(offset), dtarget(target),
          dout(DType::F32, {rows});
      ASSERT_OK(cuk::labelRank(dshard, dlab, doff, dtarget.ptr(), classes, -100,
                               dout));
      expectTol(dout, want, true);
      if (k != 0)
        continue;
      // The whole row's, reading the label's logit from the row.
      for (int64_t r = 0; r < rows; ++r)
        if (labels.get(r) >= 0)
          labels.set(r, std::fmod(labels.get(r), double(width)));
      Dev dwhole(labels);
      ASSERT_OK(
          cpuk::labelRank(shard, labels, offset, nullptr, width, -100, want));
      ASSERT_OK(
          cuk::labelRank(dshard, dwhole, doff, nullptr, width, -100, dout));
      expectTol(dout, want, true);
    }
  Host x = random(DType::F32, {2, 8}, -1, 1, 9);
  Host labels = make(DType::I64, {2}, {3, -100}); // one error: any block order
  Dev dx(x), dlab(labels), doff(make(DType::I64, {}, {8})),
      dout(DType::F32, {2});
  ASSERT_OK(cuk::labelRank(dx, dlab, doff, nullptr, 16, -100, dout));
  expectDeviceError("label_rank: label 3 at position 0 is not in the shard's "
                    "classes [8, 16), and no target is given");
  Dev bad(make(DType::I64, {2}, {9, 20}));
  ASSERT_OK(cuk::labelRank(dx, bad, doff, nullptr, 16, -100, dout));
  expectDeviceError("label_rank: label 20 at position 1 is outside [0, 16) and "
                    "is not the ignore_index -100");
}

} // namespace
} // namespace smp_cuda_test
