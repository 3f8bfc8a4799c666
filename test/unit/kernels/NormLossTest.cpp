//===- NormLossTest.cpp - layer/rms/batch norm, cross-entropy -------------===//

#include "TestUtil.h"

#include <limits>

namespace smp::kernels::cpu::test {
namespace {

std::vector<double> refLayerNorm(const Host &x, const Host &scale,
                                 const Host *bias, int64_t axis, double eps) {
  const auto &s = x.ref.shape;
  std::vector<int64_t> norm(s.begin() + axis, s.end());
  int64_t d = 1;
  for (int64_t v : norm)
    d *= v;
  std::vector<double> out(static_cast<size_t>(x.numel()));
  for (int64_t r = 0; r < x.numel() / d; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i)
      mean += x.get(r * d + i);
    mean /= d;
    for (int64_t i = 0; i < d; ++i)
      var += (x.get(r * d + i) - mean) * (x.get(r * d + i) - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i) {
      auto idx = unravel(i, norm);
      double v = (x.get(r * d + i) - mean) / std::sqrt(var + eps) *
                 scale.get(broadcastIndex(idx, scale.ref.shape));
      if (bias)
        v += bias->get(broadcastIndex(idx, bias->ref.shape));
      out[r * d + i] = v;
    }
  }
  return out;
}

TEST(LayerNorm, MatchesReference) {
  unsigned seed = 1;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (const NormCase &c : normCases()) {
      Host x = random(t, c.x, -3, 5, seed++);
      Host scale = random(DType::F32, c.scale, 0.5, 1.5, seed++);
      Host bias = random(t, c.bias.empty() ? std::vector<int64_t>{1} : c.bias,
                         -1, 1, seed++);
      const Host *b = c.bias.empty() ? nullptr : &bias;
      Host out(t, c.x);
      SCOPED_TRACE(smp::base::describe(x) + " axis " + std::to_string(c.axis));
      ASSERT_OK(layerNorm(x, scale, b ? &b->ref : nullptr, c.axis, 1e-5f, out));
      int64_t axis = c.axis < 0 ? c.axis + c.x.size() : c.axis;
      double tol = t == DType::F32 ? 1e-5 : tolFor(t) * 2;
      expectNear(out.values(), refLayerNorm(x, scale, b, axis, 1e-5), tol, tol);
    }
}

TEST(LayerNorm, KnownValuesAndErrors) {
  Host x = make(DType::F32, {1, 4}, {1, 2, 3, 4});
  Host sc = make(DType::F32, {4}, {1, 1, 1, 1}),
       bi = make(DType::F32, {4}, {0, 0, 0, 1});
  Host y(DType::F32, {1, 4});
  ASSERT_OK(layerNorm(x, sc, &bi.ref, -1, 0.0f, y));
  double r = 1 / std::sqrt(1.25);
  expectNear(y.values(), {-1.5 * r, -0.5 * r, 0.5 * r, 1.5 * r + 1}, 1e-6);
  EXPECT_FALSE(layerNorm(x, make(DType::F32, {3}), nullptr, 1, 1e-5f, y).ok());
  EXPECT_FALSE(layerNorm(x, sc, nullptr, 2, 1e-5f, y).ok());
}

TEST(RmsNorm, MatchesReference) {
  unsigned seed = 10;
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (auto shape : {std::vector<int64_t>{3, 10}, {2, 5, 64}, {300, 33}}) {
      Host x = random(t, shape, -2, 2, seed++);
      int64_t d = shape.back();
      Host scale = random(t, {d}, 0.5, 2, seed++);
      Host out(t, shape);
      ASSERT_OK(rmsNorm(x, scale, 1e-6f, out));
      std::vector<double> want(static_cast<size_t>(x.numel()));
      for (int64_t r = 0; r < x.numel() / d; ++r) {
        double ms = 0;
        for (int64_t i = 0; i < d; ++i)
          ms += x.get(r * d + i) * x.get(r * d + i);
        ms /= d;
        for (int64_t i = 0; i < d; ++i)
          want[r * d + i] =
              x.get(r * d + i) / std::sqrt(ms + 1e-6) * scale.get(i);
      }
      double tol = t == DType::F32 ? 1e-5 : tolFor(t) * 2;
      expectNear(out.values(), want, tol, tol);
    }
  Host x = make(DType::F32, {1, 2}, {3, 4}), one = make(DType::F32, {1}, {2});
  Host y(DType::F32, {1, 2});
  ASSERT_OK(rmsNorm(x, one, 0.0f, y)); // rms = sqrt(12.5); scale broadcasts
  expectNear(y.values(), {6 / std::sqrt(12.5), 8 / std::sqrt(12.5)}, 1e-6);
}

TEST(BatchNorm, MatchesReference) {
  unsigned seed = 20;
  for (DType t : {DType::F32, DType::F64, DType::F16})
    for (auto shape : {std::vector<int64_t>{2, 3, 4, 5}, {4, 6}, {2, 3, 7}}) {
      int64_t c = shape[1];
      Host x = random(t, shape, -2, 2, seed++);
      Host sc = random(DType::F32, {c}, 0.5, 2, seed++),
           bi = random(DType::F32, {c}, -1, 1, seed++);
      Host mu = random(DType::F32, {c}, -1, 1, seed++),
           var = random(DType::F32, {c}, 0.1, 2, seed++);
      Host out(t, shape);
      ASSERT_OK(batchNorm(x, sc, bi, mu, var, 1e-5f, out));
      int64_t inner = x.numel() / (shape[0] * c);
      std::vector<double> want(static_cast<size_t>(x.numel()));
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t ch = (i / inner) % c;
        want[i] = (x.get(i) - mu.get(ch)) / std::sqrt(var.get(ch) + 1e-5) *
                      sc.get(ch) +
                  bi.get(ch);
      }
      double tol = t == DType::F32 ? 1e-5 : tolFor(t) * 2;
      expectNear(out.values(), want, tol, tol);
    }
  Host x(DType::F32, {2, 3}), p(DType::F32, {2});
  EXPECT_FALSE(batchNorm(x, p, p, p, p, 1e-5f, x).ok()); // 3 channels
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

TEST(CrossEntropy, HandComputedWithIgnoreIndex) {
  // Rows: [1, 2, 3] label 2; [1, 1, 1] ignored; [0, 0, 5] label 0.
  Host logits = make(DType::F32, {3, 3}, {1, 2, 3, 1, 1, 1, 0, 0, 5});
  Host labels = make(DType::I64, {3}, {2, -100, 0});
  double l0 = std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 3;
  double l2 = std::log(2 + std::exp(5)) - 0;
  Host none(DType::F32, {3});
  ASSERT_OK(crossEntropy(logits, labels, -100, Reduction::None, none));
  expectNear(none.values(), {l0, 0, l2}, 1e-6);
  Host s(DType::F32, {});
  ASSERT_OK(crossEntropy(logits, labels, -100, Reduction::Sum, s));
  EXPECT_NEAR(s.get(0), l0 + l2, 1e-5);
  ASSERT_OK(crossEntropy(logits, labels, -100, Reduction::Mean, s));
  EXPECT_NEAR(s.get(0), (l0 + l2) / 2, 1e-6); // divides by 2, not 3
  EXPECT_NEAR(l0, 0.40760596444438, 1e-12);
  // All ignored: mean is NaN (as PyTorch), sum is 0.
  Host ign = make(DType::I32, {3}, {7, 7, 7});
  ASSERT_OK(crossEntropy(logits, ign, 7, Reduction::Mean, s));
  EXPECT_TRUE(std::isnan(s.get(0)));
  ASSERT_OK(crossEntropy(logits, ign, 7, Reduction::Sum, s));
  EXPECT_EQ(s.get(0), 0);
}

TEST(CrossEntropy, ClassWeightsScaleLossesAndTheMean) {
  // PyTorch: F.cross_entropy(x, y, weight=w) = sum_i w[y_i] l_i / sum_i w[y_i]
  // over the labels that are not ignored.
  Host logits = make(DType::F32, {3, 3}, {1, 2, 3, 1, 1, 1, 0, 0, 5});
  Host labels = make(DType::I64, {3}, {2, -100, 0});
  Host weights = make(DType::F32, {3}, {0.5, 2, 3});
  double l0 = std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 3;
  double l2 = std::log(2 + std::exp(5)) - 0;
  Host none(DType::F32, {3});
  ASSERT_OK(crossEntropy(logits, labels, -100, Reduction::None, none,
                         &weights.ref));
  expectNear(none.values(), {3 * l0, 0, 0.5 * l2}, 1e-6);
  Host s(DType::F32, {});
  ASSERT_OK(crossEntropy(logits, labels, -100, Reduction::Mean, s,
                         &weights.ref));
  EXPECT_NEAR(s.get(0), (3 * l0 + 0.5 * l2) / 3.5, 1e-6);
  Host wrong = make(DType::F32, {2}, {1, 1});
  EXPECT_FALSE(crossEntropy(logits, labels, -100, Reduction::Mean, s,
                            &wrong.ref)
                   .ok());
}

TEST(CrossEntropy, RejectsLabelsOutOfRange) {
  Host logits(DType::F32, {2, 4});
  Host out(DType::F32, {});
  smp::base::Status st = crossEntropy(logits, make(DType::I64, {2}, {1, 4}),
                                      -100, Reduction::Mean, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error.find("label 4"), std::string::npos) << st.error;
  EXPECT_NE(st.error.find("cross_entropy"), std::string::npos) << st.error;
  EXPECT_FALSE(crossEntropy(logits, make(DType::I8, {2}, {-1, 0}), -100,
                            Reduction::Mean, out)
                   .ok());
  EXPECT_FALSE(
      crossEntropy(logits, make(DType::I64, {3}), -100, Reduction::Mean, out)
          .ok()); // shape
}

TEST(CrossEntropy, MatchesReferenceOnBatches) {
  unsigned seed = 30;
  for (DType t : {DType::F32, DType::F64, DType::BF16})
    for (DType lt : {DType::I64, DType::I32, DType::U8}) {
      Host logits = random(t, {2, 33, 50}, -10, 10, seed++);
      Host labels = random(lt, {2, 33}, 0, 50, seed++);
      int64_t ignore = 3;
      std::vector<double> want(66);
      double sum = 0;
      int count = 0;
      for (int64_t r = 0; r < 66; ++r) {
        int64_t lab = static_cast<int64_t>(labels.get(r));
        if (lab == ignore)
          continue;
        double m = -INFINITY, z = 0;
        for (int64_t c = 0; c < 50; ++c)
          m = std::max(m, logits.get(r * 50 + c));
        for (int64_t c = 0; c < 50; ++c)
          z += std::exp(logits.get(r * 50 + c) - m);
        want[r] = std::log(z) + m - logits.get(r * 50 + lab);
        sum += want[r];
        ++count;
      }
      Host none(t, {2, 33}), mean(t, {});
      ASSERT_OK(crossEntropy(logits, labels, ignore, Reduction::None, none));
      double tol = t == DType::F32 ? 1e-5 : tolFor(t);
      expectNear(none.values(), want, tol, tol);
      ASSERT_OK(crossEntropy(logits, labels, ignore, Reduction::Mean, mean));
      EXPECT_NEAR(mean.get(0), sum / count, tol * 4);
    }
}

/// `x` [rows, classes] with each row widened to `stride` by NaN padding.
Host padRows(const Host &x, int64_t stride) {
  int64_t classes = x.ref.shape.back(), rows = x.numel() / classes;
  std::vector<int64_t> shape = x.ref.shape;
  shape.back() = stride;
  Host p(x.ref.dtype, shape);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < stride; ++c)
      p.set(r * stride + c, c < classes
                                ? x.get(r * classes + c)
                                : std::numeric_limits<double>::quiet_NaN());
  return p;
}

// smp-pad-classes: logits rows padded past their classes (here with NaN,
// which any read would spread) give the loss and gradient of the unpadded
// rows bit for bit, and a zero gradient in the padding; written over the
// logits themselves, the same gradient.
TEST(CrossEntropy, PaddedRowsReadOnlyTheirClasses) {
  unsigned seed = 60;
  for (DType t : {DType::F32, DType::BF16, DType::F64})
    for (Reduction red : {Reduction::None, Reduction::Mean}) {
      Host logits = random(t, {3, 5, 13}, -6, 6, seed++);
      Host labels = random(DType::I64, {3, 5}, 0, 13, seed++);
      labels.set(4, 2); // ignored
      Host padded = padRows(logits, 16);
      std::vector<int64_t> lossShape = red == Reduction::None
                                           ? std::vector<int64_t>{3, 5}
                                           : std::vector<int64_t>{};
      Host want(t, lossShape), got(t, lossShape);
      ASSERT_OK(crossEntropy(logits, labels, 2, red, want));
      ASSERT_OK(crossEntropy(padded, labels, 2, red, got, nullptr, 13));
      EXPECT_EQ(got.values(), want.values());
      Host dloss = random(t, lossShape, -1, 1, seed++);
      Host dwant(t, {3, 5, 13}), dgot(t, {3, 5, 16});
      for (int64_t i = 0; i < dgot.numel(); ++i)
        dgot.set(i, 7); // not left as it was
      ASSERT_OK(
          crossEntropyGrad(logits, labels, nullptr, dloss, 2, red, dwant));
      ASSERT_OK(
          crossEntropyGrad(padded, labels, nullptr, dloss, 2, red, dgot, 13));
      for (int64_t r = 0; r < 15; ++r)
        for (int64_t c = 0; c < 16; ++c)
          EXPECT_EQ(dgot.get(r * 16 + c), c < 13 ? dwant.get(r * 13 + c) : 0.0)
              << "row " << r << " class " << c;
      // In place (the writer gives the gradient the logits' storage when
      // nothing reads them after): the same bits.
      Host inPlace = padded;
      ASSERT_OK(crossEntropyGrad(inPlace, labels, nullptr, dloss, 2, red,
                                 inPlace, 13));
      EXPECT_EQ(inPlace.values(), dgot.values());
    }
}

TEST(CrossEntropy, PaddedRowsRefuseLabelsInThePadding) {
  Host logits(DType::F32, {2, 8});
  Host out(DType::F32, {});
  Host labels = make(DType::I64, {2}, {1, 6});
  Status s =
      crossEntropy(logits, labels, -100, Reduction::Mean, out, nullptr, 6);
  EXPECT_EQ(s.error, "cross_entropy: label 6 at position 1 is outside [0, 6) "
                     "and is not the ignore_index -100");
  Host dloss = make(DType::F32, {1}, {1}), dlogits(DType::F32, {2, 8});
  s = crossEntropyGrad(logits, labels, nullptr, dloss, -100, Reduction::Mean,
                       dlogits, 6);
  EXPECT_EQ(s.error,
            "cross_entropy_grad: label 6 at position 1 is outside [0, 6)");
  s = crossEntropy(logits, labels, -100, Reduction::Mean, out, nullptr, 9);
  EXPECT_EQ(s.error, "cross_entropy: 9 classes do not fit logits rows of 8");
  s = crossEntropyGrad(logits, labels, nullptr, dloss, -100, Reduction::Mean,
                       dlogits, -1);
  EXPECT_EQ(s.error,
            "cross_entropy_grad: -1 classes do not fit logits rows of 8");
  // Class weights range over the classes.
  Host w6 = make(DType::F32, {6}, {1, 1, 1, 1, 1, 1});
  Host ok = make(DType::I64, {2}, {1, 5});
  EXPECT_OK(crossEntropy(logits, ok, -100, Reduction::Mean, out, &w6.ref, 6));
  EXPECT_OK(crossEntropyGrad(logits, ok, &w6.ref, dloss, -100, Reduction::Mean,
                             dlogits, 6));
}

// The gradient kernels share their argument checks with the CUDA backend
// (kernels/common TrainingChecks.cpp): contradictory arguments are refused
// with the same messages on both.
TEST(NormGrad, RefusesAScaleThatDoesNotBroadcast) {
  Host x = make(DType::F32, {2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  Host scale = make(DType::F32, {3}, {1, 1, 1});
  Host dx(DType::F32, {2, 4}), ds(DType::F32, {3}), db(DType::F32, {3});
  Status s = layerNormGrad(x, scale, x, -1, 1e-5f, dx, ds, db);
  EXPECT_EQ(s.error,
            "layer_norm_grad: scale 3xf32 does not broadcast onto [4]");
  s = rmsNormGrad(x, scale, x, 1e-6f, dx, ds);
  EXPECT_EQ(s.error, "rms_norm_grad: scale 3xf32 does not broadcast onto [4]");
  Host small(DType::F32, {4});
  s = rmsNormGrad(x, make(DType::F32, {4}, {1, 1, 1, 1}), x, 1e-6f, small,
                  ds);
  EXPECT_EQ(s.error, "rms_norm_grad: gradients must have the sizes of the "
                     "input and scale");
}

TEST(CrossEntropyGrad, RefusesFloatLabelsAndBadWeights) {
  Host logits = make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Host labels = make(DType::F32, {2}, {0, 2});
  Host dloss = make(DType::F32, {1}, {1});
  Host dlogits(DType::F32, {2, 3});
  Status s = crossEntropyGrad(logits, labels, nullptr, dloss, -100,
                              Reduction::Mean, dlogits);
  EXPECT_EQ(s.error, "cross_entropy_grad: labels must be integers, got 2xf32");
  Host ints = make(DType::I64, {2}, {0, 2});
  Host weights = make(DType::F32, {2}, {1, 1});
  s = crossEntropyGrad(logits, ints, &weights.ref, dloss, -100, Reduction::Mean,
                       dlogits);
  EXPECT_EQ(s.error, "cross_entropy_grad: weights must hold one value per "
                     "class");
  s = crossEntropyGrad(logits, ints, nullptr, dloss, -100, Reduction::None,
                       dlogits);
  EXPECT_EQ(s.error, "cross_entropy_grad: incoming gradient does not match "
                     "the loss");
}

} // namespace
} // namespace smp::kernels::cpu::test
