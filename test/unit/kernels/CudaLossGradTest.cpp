//===- CudaLossGradTest.cpp - CUDA cross_entropy_with_grad vs the CPU -----===//
//
// smp-fuse-loss-grad's op: the loss and the logits' gradient of one launch
// against the CPU kernels, and bit for bit against the CUDA backend's own
// two kernels (the fusion promises the same numbers).
//
//===----------------------------------------------------------------------===//

#include "CudaTestUtil.h"

#include <cmath>
#include <limits>

namespace smp_cuda_test {
namespace {

using Red = cuk::Reduction;

/// One case: rows of `stride` values of which `classes` are logits (NaN
/// past them: a read of the padding shows), the loss in `lossType`.
struct LossGradCase {
  DType t, lossType;
  int64_t rows, classes, stride;
  Red red;
  bool weighted, inPlace;
};

std::string describe(const LossGradCase &c) {
  return std::string(name(c.t)) + " loss " + name(c.lossType) + " " +
         std::to_string(c.rows) + "x" + std::to_string(c.classes) + "/" +
         std::to_string(c.stride) + " reduction " + std::to_string(int(c.red)) +
         (c.weighted ? " weighted" : "") + (c.inPlace ? " in place" : "");
}

void checkCase(const LossGradCase &c, unsigned seed) {
  SCOPED_TRACE(describe(c));
  Host logits = random(c.t, {c.rows, c.stride}, -4, 4, seed++);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t k = c.classes; k < c.stride; ++k)
      logits.set(r * c.stride + k, std::numeric_limits<double>::quiet_NaN());
  Host labels = random(DType::I64, {c.rows}, 0, double(c.classes), seed++);
  labels.set(1, -100);
  labels.set(0, c.classes - 1); // the row's last logit
  Host w = random(c.t, {c.classes}, 0.5, 2, seed++);
  const TensorRef *hw = c.weighted ? &w.ref : nullptr;
  std::vector<int64_t> lossShape = c.red == Red::None
                                       ? std::vector<int64_t>{c.rows}
                                       : std::vector<int64_t>{};
  Host g = c.red == Red::None ? random(DType::F32, {c.rows}, -1, 1, seed++)
                              : make(DType::F32, {}, {0.75});
  auto cred = static_cast<cpuk::Reduction>(c.red);
  Host loss(c.lossType, lossShape), grad(c.t, {c.rows, c.stride});
  ASSERT_OK(
      cpuk::crossEntropy(logits, labels, -100, cred, loss, hw, c.classes));
  ASSERT_OK(cpuk::crossEntropyGrad(logits, labels, hw, g, -100, cred, grad,
                                   c.classes));

  Dev dl(logits), dlab(labels), dw(w), dg(g);
  const TensorRef *dwp = c.weighted ? dw.ptr() : nullptr;
  // The CUDA backend's two kernels.
  Dev twoLoss(c.lossType, lossShape), twoGrad(c.t, {c.rows, c.stride});
  ASSERT_OK(cuk::crossEntropy(dl, dlab, -100, c.red, twoLoss, dwp, c.classes));
  ASSERT_OK(cuk::crossEntropyGrad(dl, dlab, dwp, dg, -100, c.red, twoGrad,
                                  c.classes));
  // The fused op, over the logits' storage or beside it.
  Dev fusedLoss(c.lossType, lossShape), other(c.t, {c.rows, c.stride});
  Dev over(logits);
  const Dev &x = c.inPlace ? over : dl, &dx = c.inPlace ? over : other;
  ASSERT_OK(cuk::crossEntropyWithGrad(x, dlab, dwp, dg, -100, c.red, fusedLoss,
                                      dx, c.classes));
  expectTol(fusedLoss, loss, true);
  expectTol(dx, grad, true);
  expectSameBytes(fusedLoss, twoLoss.download());
  expectSameBytes(dx, twoGrad.download());
}

/// Rows of one block's few vectors (700 classes, padded and not) and rows
/// wider than four vectors a thread of a 1024-thread block (33,000
/// classes: the statistics' four-vector loads); f32 and f64 logits, bf16
/// and f16 with an f32 loss (smp-fuse-loss-casts' step), every reduction,
/// with and without class weights, in place and not.
TEST_F(Cuda, CrossEntropyWithGradIsTheCpusAndTheTwoKernels) {
  unsigned seed = 900;
  struct Shape {
    int64_t rows, classes, stride;
  };
  for (Shape s :
       {Shape{9, 700, 704}, Shape{9, 704, 704}, Shape{3, 33000, 33024}})
    for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64})
      for (Red red : {Red::None, Red::Sum, Red::Mean})
        for (bool weighted : {false, true}) {
          if (s.classes > 1000 && (weighted || red == Red::Sum))
            continue; // the wide rows: the statistics, not the options
          DType lossType = t == DType::BF16 || t == DType::F16 ? DType::F32 : t;
          checkCase({t, lossType, s.rows, s.classes, s.stride, red, weighted,
                     /*inPlace=*/(seed % 2) == 0},
                    seed);
          seed += 8;
        }
}

/// Where the one kernel does not apply (rows not whole 16-byte vectors, a
/// gradient of another dtype) the op runs the two kernels: the same
/// numbers.
TEST_F(Cuda, CrossEntropyWithGradFallsBackToTheTwoKernels) {
  checkCase({DType::BF16, DType::F32, 5, 701, 701, Red::Mean, false, false},
            950);
  checkCase({DType::BF16, DType::F32, 5, 701, 701, Red::Mean, false, true},
            960);
  unsigned seed = 970;
  Host logits = random(DType::BF16, {4, 64}, -2, 2, seed++);
  Host labels = random(DType::I64, {4}, 0, 64, seed++);
  Host g = make(DType::F32, {}, {1});
  Host loss(DType::F32, {}), grad(DType::F32, {4, 64});
  ASSERT_OK(
      cpuk::crossEntropy(logits, labels, -100, cpuk::Reduction::Mean, loss));
  ASSERT_OK(cpuk::crossEntropyGrad(logits, labels, nullptr, g, -100,
                                   cpuk::Reduction::Mean, grad));
  Dev dl(logits), dlab(labels), dg(g), dloss(DType::F32, {}),
      dgrad(DType::F32, {4, 64});
  ASSERT_OK(cuk::crossEntropyWithGrad(dl, dlab, nullptr, dg, -100, Red::Mean,
                                      dloss, dgrad));
  expectTol(dloss, loss, true);
  expectTol(dgrad, grad, true);
}

/// A label outside the classes: the loss's device error, naming it.
TEST_F(Cuda, CrossEntropyWithGradNamesABadLabel) {
  Host logits = random(DType::BF16, {2, 16}, -1, 1, 1);
  Host labels = make(DType::I32, {2}, {1, 16}), g = make(DType::F32, {}, {1});
  Dev dl(logits), dlab(labels), dg(g), dloss(DType::F32, {}),
      dgrad(DType::BF16, {2, 16});
  ASSERT_OK(cuk::crossEntropyWithGrad(dl, dlab, nullptr, dg, -100, Red::Mean,
                                      dloss, dgrad));
  expectDeviceError("cross_entropy: label 16 at position 1");
}

} // namespace
} // namespace smp_cuda_test
