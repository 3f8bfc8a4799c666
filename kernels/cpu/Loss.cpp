//===- Loss.cpp - Softmax cross-entropy (PyTorch semantics) ---------------===//
//
// loss[r] = logsumexp(logits[r, :]) - logits[r, label[r]], the exponentials
// of x - max summed in double (f32 rows through VecMath's exp, f16/bf16 rows
// widened to f32 first, so they give the bits of their f32 copy; f64 through
// the C library in double). Labels are checked before any work. The loss
// has the logits' dtype, or f32 for f16/bf16 logits. A row may be longer
// than its classes (smp-pad-classes): the rest is not read.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "VecMath.h"

namespace smp::kernels::cpu {
using namespace detail;

namespace {

template <class S>
void rowLosses(const S *x, const std::vector<int64_t> &labels,
               int64_t ignoreIndex, int64_t classes, int64_t stride,
               std::vector<double> &loss) {
  using C = typename Float<S>::C;
  constexpr bool viaF32 = std::is_same_v<C, float>; // f32, f16, bf16
  int64_t rows = static_cast<int64_t>(labels.size());
  parallelFor(rows, grainFor(8 * classes), [&](int64_t begin, int64_t end) {
    std::vector<float> e(viaF32 ? classes : 0);
    std::vector<float> wide(viaF32 && !std::is_same_v<S, float> ? classes : 0);
    for (int64_t r = begin; r < end; ++r) {
      if (labels[r] == ignoreIndex) {
        loss[r] = 0;
        continue;
      }
      const S *xr = x + r * stride;
      if constexpr (viaF32) {
        const float *xf = widenRow(xr, wide, classes);
        float m = vecMax(xf, classes);
        double sum = vecExpSum(xf, e.data(), classes, m);
        loss[r] = std::log(sum) + static_cast<double>(m) -
                  static_cast<double>(xf[labels[r]]);
        continue;
      }
      C m = -std::numeric_limits<C>::infinity();
      for (int64_t c = 0; c < classes; ++c) {
        C v = Float<S>::load(xr[c]);
        m = v > m ? v : m;
      }
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp(static_cast<double>(Float<S>::load(xr[c])) -
                        static_cast<double>(m));
      loss[r] = std::log(sum) + static_cast<double>(m) -
                static_cast<double>(Float<S>::load(xr[labels[r]]));
    }
  });
}

} // namespace

/// Element i of a float tensor of any float dtype, as double.
static double loadFloatAt(const TensorRef &t, int64_t i) {
  double v = 0;
  visitFloat(t.dtype, "cross_entropy", [&](auto tag) {
    using S = typename decltype(tag)::type;
    v = static_cast<double>(Float<S>::load(t.as<S>()[i]));
    return Status::success();
  });
  return v;
}

Status crossEntropy(const TensorRef &logits, const TensorRef &labels,
                    int64_t ignoreIndex, Reduction reduction,
                    const TensorRef &out, const TensorRef *weights,
                    int64_t requested) {
  const char *name = "cross_entropy";
  int64_t classes, stride, rows = labels.numel();
  SMP_RETURN_IF_ERROR(
      common::checkCrossEntropy(logits, labels, reduction != Reduction::None,
                                out, weights, requested, classes, stride));
  std::vector<int64_t> lab;
  SMP_RETURN_IF_ERROR(loadLabels(name, labels, classes, ignoreIndex, lab));
  double counted = 0; // labels not ignored, or the sum of their weights
  for (int64_t v : lab)
    if (v != ignoreIndex)
      counted += weights ? loadFloatAt(*weights, v) : 1.0;
  std::vector<double> loss(static_cast<size_t>(rows));
  return visitFloat(logits.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    rowLosses(logits.as<S>(), lab, ignoreIndex, classes, stride, loss);
    if (weights)
      for (int64_t r = 0; r < rows; ++r)
        if (lab[r] != ignoreIndex)
          loss[r] *= loadFloatAt(*weights, lab[r]);
    return visitFloat(out.dtype, name, [&](auto otag) {
      using O = typename decltype(otag)::type;
      using CO = typename Float<O>::C;
      O *o = out.as<O>();
      if (reduction == Reduction::None) {
        for (int64_t r = 0; r < rows; ++r)
          o[r] = Float<O>::store(static_cast<CO>(loss[r]));
        return Status::success();
      }
      double total = 0;
      for (double l : loss)
        total += l;
      if (reduction == Reduction::Mean) // 0 / 0 = NaN when all are ignored
        total = counted != 0 ? total / counted
                             : std::numeric_limits<double>::quiet_NaN();
      o[0] = Float<O>::store(static_cast<CO>(total));
      return Status::success();
    });
  });
}

} // namespace smp::kernels::cpu
