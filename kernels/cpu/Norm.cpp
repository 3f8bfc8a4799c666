//===- Norm.cpp - layer_norm, rms_norm, batch_norm (inference) ------------===//
//
// Statistics accumulate in double (two passes for the variance); the
// normalised values are computed in the compute type (f32 for f32/f16/bf16).
// Rows (layer/rms norm) or channel planes (batch norm) run in parallel.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

namespace smp::kernels::cpu {
using namespace detail;

namespace {

/// The parameter `p` (any float dtype) broadcast onto `target`, flattened.
template <class C>
std::vector<C> expandParam(const TensorRef &p,
                           const std::vector<int64_t> &target) {
  std::vector<double> v = toDouble(p);
  std::vector<int64_t> strides;
  broadcastStrides(p.shape, target, strides);
  int64_t n = product(target);
  std::vector<C> out(static_cast<size_t>(n));
  if (n == 0)
    return out;
  StridedLoop<1>(target, {strides})
      .forEachRun(0, n,
                  [&](int64_t pos, const std::array<int64_t, 1> &off,
                      int64_t len, const std::array<int64_t, 1> &in) {
                    for (int64_t i = 0; i < len; ++i)
                      out[pos + i] = static_cast<C>(v[off[0] + i * in[0]]);
                  });
  return out;
}

/// The sum of f(t[i]) in double, over eight interleaved partial sums so that
/// the loop vectorises (a single running sum is one long dependency chain).
template <class C, class F> double sumDouble(const C *t, int64_t n, F f) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k)
      acc[k] += f(static_cast<double>(t[i + k]));
  double tail = 0;
  for (; i < n; ++i)
    tail += f(static_cast<double>(t[i]));
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) +
         ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

template <class S>
void layerNormRows(const S *x, S *y, int64_t rows, int64_t d,
                   const std::vector<typename Float<S>::C> &scale,
                   const std::vector<typename Float<S>::C> *bias, double eps) {
  using C = typename Float<S>::C;
  parallelFor(rows, grainFor(4 * d), [&](int64_t begin, int64_t end) {
    std::vector<C> t(static_cast<size_t>(d));
    for (int64_t r = begin; r < end; ++r) {
      const S *xr = x + r * d;
      for (int64_t i = 0; i < d; ++i)
        t[i] = Float<S>::load(xr[i]);
      double mean = sumDouble(t.data(), d, [](double v) { return v; }) /
                    static_cast<double>(d);
      double sq = sumDouble(t.data(), d, [mean](double v) {
        double c = v - mean;
        return c * c;
      });
      C rstd =
          static_cast<C>(1.0 / std::sqrt(sq / static_cast<double>(d) + eps));
      C m = static_cast<C>(mean);
      S *yr = y + r * d;
      if (bias)
        for (int64_t i = 0; i < d; ++i)
          yr[i] = Float<S>::store((t[i] - m) * rstd * scale[i] + (*bias)[i]);
      else
        for (int64_t i = 0; i < d; ++i)
          yr[i] = Float<S>::store((t[i] - m) * rstd * scale[i]);
    }
  });
}

} // namespace

Status layerNorm(const TensorRef &in, const TensorRef &scale,
                 const TensorRef *bias, int64_t axis, float epsilon,
                 const TensorRef &out) {
  const char *name = "layer_norm";
  std::vector<int64_t> normShape;
  SMP_RETURN_IF_ERROR(
      common::checkLayerNorm(in, scale, bias, axis, out, normShape));
  int64_t d = product(normShape);
  if (in.numel() == 0)
    return Status::success();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename Float<S>::C;
    std::vector<C> sc = expandParam<C>(scale, normShape), bi;
    if (bias)
      bi = expandParam<C>(*bias, normShape);
    layerNormRows(in.as<S>(), out.as<S>(), in.numel() / d, d, sc,
                  bias ? &bi : nullptr, static_cast<double>(epsilon));
    return Status::success();
  });
}

Status rmsNorm(const TensorRef &in, const TensorRef &scale, float epsilon,
               const TensorRef &out) {
  const char *name = "rms_norm";
  std::vector<int64_t> last;
  SMP_RETURN_IF_ERROR(common::checkRmsNorm(in, scale, out, last));
  int64_t d = last[0];
  if (in.numel() == 0)
    return Status::success();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename Float<S>::C;
    std::vector<C> sc = expandParam<C>(scale, last);
    const S *x = in.as<S>();
    S *y = out.as<S>();
    double eps = static_cast<double>(epsilon);
    parallelFor(
        in.numel() / d, grainFor(3 * d), [&](int64_t begin, int64_t end) {
          std::vector<C> t(static_cast<size_t>(d));
          for (int64_t r = begin; r < end; ++r) {
            for (int64_t i = 0; i < d; ++i)
              t[i] = Float<S>::load(x[r * d + i]);
            double sq = sumDouble(t.data(), d, [](double v) { return v * v; });
            C inv = static_cast<C>(
                1.0 / std::sqrt(sq / static_cast<double>(d) + eps));
            for (int64_t i = 0; i < d; ++i)
              y[r * d + i] = Float<S>::store(t[i] * inv * sc[i]);
          }
        });
    return Status::success();
  });
}

Status batchNorm(const TensorRef &in, const TensorRef &scale,
                 const TensorRef &bias, const TensorRef &mean,
                 const TensorRef &variance, float epsilon,
                 const TensorRef &out) {
  const char *name = "batch_norm";
  SMP_RETURN_IF_ERROR(
      common::checkBatchNorm(in, scale, bias, mean, variance, out));
  int64_t channels = in.shape[1];
  if (in.numel() == 0)
    return Status::success();
  std::vector<double> sc = toDouble(scale), bi = toDouble(bias),
                      mu = toDouble(mean), var = toDouble(variance);
  int64_t planes = in.shape[0] * channels, inner = product(in.shape, 2);
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename Float<S>::C;
    const S *x = in.as<S>();
    S *y = out.as<S>();
    parallelFor(planes, grainFor(2 * inner), [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        int64_t c = p % channels;
        C m = static_cast<C>(mu[c]), b = static_cast<C>(bi[c]);
        C a = static_cast<C>(sc[c] /
                             std::sqrt(var[c] + static_cast<double>(epsilon)));
        const S *xp = x + p * inner;
        S *yp = y + p * inner;
        for (int64_t i = 0; i < inner; ++i)
          yp[i] = Float<S>::store((Float<S>::load(xp[i]) - m) * a + b);
      }
    });
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
