//===- NormGrad.cpp - layer_norm_grad, rms_norm_grad ----------------------===//
//
// Rows are independent for dx and run in parallel; the scale (and bias)
// gradients sum over rows. Rows go in blocks whose size depends only on the
// shape: each block sums its rows in row order into its own partial, and the
// partials are added in block order, so the bits do not depend on the thread
// count. Everything is computed in double, a row at a time (no copy of a
// whole tensor).
//
//===----------------------------------------------------------------------===//

#include "Common.h"

namespace smp::kernels::cpu {
using namespace detail;

namespace {

/// For each index of `full` (row-major), the index of `part`, which
/// numpy-broadcasts onto it.
std::vector<int64_t> broadcastIndex(const std::vector<int64_t> &full,
                                    const std::vector<int64_t> &part) {
  int64_t n = product(full);
  std::vector<int64_t> map(n), idx(full.size(), 0);
  size_t off = full.size() - part.size();
  for (int64_t k = 0; k < n; ++k) {
    int64_t o = 0;
    for (size_t d = off; d < full.size(); ++d) {
      int64_t pd = part[d - off];
      o = o * pd + (pd == 1 ? 0 : idx[d]);
    }
    map[k] = o;
    for (size_t d = full.size(); d-- > 0;) {
      if (++idx[d] < full[d])
        break;
      idx[d] = 0;
    }
  }
  return map;
}

/// Runs rowFn(xr, gr, outRow, acc) on every row of n elements (as doubles)
/// and stores outRow into dx; acc (nAcc x params doubles) is the row's
/// block partial. Returns the sum of the partials in block order. With a
/// residual, dx's row is rounded to its type first and the residual added
/// after, as a separate add would (exact in double, then rounded once more:
/// double rounding through f64 is innocuous for the narrower types).
template <class RowFn>
std::vector<double> normGradRows(const char *op, const TensorRef &x,
                                 const TensorRef &dy, const TensorRef &dx,
                                 const TensorRef *residual, int64_t n,
                                 int64_t accSize, RowFn &&rowFn) {
  int64_t rows = n ? x.numel() / n : 0;
  bool f32 = dx.dtype == DType::F32 && residual &&
             residual->dtype == DType::F32;
  return sumRowBlocks(rows, accSize, n * 16, [&](int64_t r0, int64_t r1,
                                                 double *acc) {
    std::vector<double> xr(n), gr(n), out(n);
    for (int64_t r = r0; r < r1; ++r) {
      // checkNormGrad made sure every operand is float.
      (void)loadDoubles(x, r * n, n, xr.data());
      (void)loadDoubles(dy, r * n, n, gr.data());
      rowFn(xr.data(), gr.data(), out.data(), acc);
      if (f32) { // dx rounded to f32, then the f32 add
        const float *res = residual->as<float>() + r * n;
        float *d = dx.as<float>() + r * n;
        for (int64_t j = 0; j < n; ++j)
          d[j] = static_cast<float>(out[j]) + res[j];
        continue;
      }
      if (residual) {
        // Read before dx's row is written: they may share memory.
        (void)loadDoubles(*residual, r * n, n, gr.data());
        (void)storeDoubles(op, dx, r * n, n, out.data());
        (void)loadDoubles(dx, r * n, n, out.data());
        for (int64_t j = 0; j < n; ++j)
          out[j] += gr[j];
      }
      (void)storeDoubles(op, dx, r * n, n, out.data());
    }
  });
}

/// The sum of f(j) for j < n over four interleaved partial sums, so that
/// the loop vectorises.
template <class F> double sum4(int64_t n, F &&f) {
  double a[4] = {0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int k = 0; k < 4; ++k)
      a[k] += f(j + k);
  double tail = 0;
  for (; j < n; ++j)
    tail += f(j);
  return ((a[0] + a[1]) + (a[2] + a[3])) + tail;
}

/// Adds v(j) into acc[map[j]], or acc[j] without a map (the scale has the
/// normalised shape: the common case, which vectorises).
template <class F>
void scatterAdd(double *acc, const std::vector<int64_t> *map, int64_t n,
                F &&v) {
  if (!map) {
    for (int64_t j = 0; j < n; ++j)
      acc[j] += v(j);
    return;
  }
  for (int64_t j = 0; j < n; ++j)
    acc[(*map)[j]] += v(j);
}

/// The scale broadcast onto the normalised shape, and the map from there
/// to the scale's elements (null when it is the identity).
struct ExpandedScale {
  std::vector<double> w; // one per normalised element
  std::vector<int64_t> map;
  const std::vector<int64_t> *mapOrNull = nullptr;
  ExpandedScale(const TensorRef &scale, const std::vector<int64_t> &norm) {
    std::vector<double> v = toDouble(scale);
    map = broadcastIndex(norm, scale.shape);
    w.resize(map.size());
    for (size_t j = 0; j < map.size(); ++j)
      w[j] = v[map[j]];
    if (static_cast<int64_t>(v.size()) != static_cast<int64_t>(map.size()))
      mapOrNull = &map;
  }
};

Status storeRange(const char *op, const TensorRef &out,
                  const std::vector<double> &v, int64_t begin) {
  return storeDoubles(op, out, 0, out.numel(), v.data() + begin);
}

} // namespace

Status layerNormGrad(const TensorRef &x, const TensorRef &scale,
                     const TensorRef &dy, int64_t axis, float epsilon,
                     const TensorRef &dx, const TensorRef &dscale,
                     const TensorRef &dbias, const TensorRef *residual) {
  const char *op = "layer_norm_grad";
  std::vector<int64_t> norm;
  SMP_RETURN_IF_ERROR(
      common::checkNormGrad(op, x, scale, dy, axis, dx, dscale, &dbias, norm));
  SMP_RETURN_IF_ERROR(common::checkResidual(op, x, residual));
  int64_t n = product(norm), params = scale.numel();
  ExpandedScale es(scale, norm);
  const double *w = es.w.data();
  std::vector<double> total = normGradRows(
      op, x, dy, dx, residual, n, 2 * params,
      [&](const double *xr, const double *gr, double *out, double *acc) {
        double mean = sum4(n, [&](int64_t j) { return xr[j]; }) / n;
        double var = sum4(n, [&](int64_t j) {
                       double c = xr[j] - mean;
                       return c * c;
                     }) / n;
        double rstd = 1.0 / std::sqrt(var + epsilon);
        double sumD = sum4(n, [&](int64_t j) { return gr[j] * w[j]; });
        double sumDX = rstd * sum4(n, [&](int64_t j) {
                         return gr[j] * w[j] * (xr[j] - mean);
                       });
        scatterAdd(acc, es.mapOrNull, n, [&](int64_t j) {
          return gr[j] * ((xr[j] - mean) * rstd);
        });
        scatterAdd(acc + params, es.mapOrNull, n,
                   [&](int64_t j) { return gr[j]; });
        double a = sumD / n, c = sumDX / n;
        for (int64_t j = 0; j < n; ++j)
          out[j] = rstd * (gr[j] * w[j] - a - (xr[j] - mean) * rstd * c);
      });
  SMP_RETURN_IF_ERROR(storeRange(op, dscale, total, 0));
  return storeRange(op, dbias, total, params);
}

Status rmsNormGrad(const TensorRef &x, const TensorRef &scale,
                   const TensorRef &dy, float epsilon, const TensorRef &dx,
                   const TensorRef &dscale, const TensorRef *residual) {
  const char *op = "rms_norm_grad";
  std::vector<int64_t> norm;
  SMP_RETURN_IF_ERROR(
      common::checkNormGrad(op, x, scale, dy, -1, dx, dscale, nullptr, norm));
  SMP_RETURN_IF_ERROR(common::checkResidual(op, x, residual));
  int64_t n = x.shape.back();
  ExpandedScale es(scale, {n});
  const double *w = es.w.data();
  std::vector<double> total = normGradRows(
      op, x, dy, dx, residual, n, scale.numel(),
      [&](const double *xr, const double *gr, double *out, double *ds) {
        double ms = sum4(n, [&](int64_t j) { return xr[j] * xr[j]; }) / n;
        double rr = 1.0 / std::sqrt(ms + epsilon);
        double dot = sum4(n, [&](int64_t j) { return gr[j] * w[j] * xr[j]; });
        scatterAdd(ds, es.mapOrNull, n,
                   [&](int64_t j) { return gr[j] * xr[j] * rr; });
        double c = rr * rr * dot / n;
        for (int64_t j = 0; j < n; ++j)
          out[j] = rr * (gr[j] * w[j] - xr[j] * c);
      });
  return storeRange(op, dscale, total, 0);
}

} // namespace smp::kernels::cpu
