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

/// The number of row blocks: at most 256 and at least one per 16 rows, and
/// their partial sums (nAcc x params doubles each) within 32 MiB. A function
/// of the shape only.
int64_t rowBlocks(int64_t rows, int64_t accSize) {
  int64_t byMemory =
      std::max<int64_t>(1, (int64_t(1) << 22) / std::max<int64_t>(accSize, 1));
  return std::max<int64_t>(
      1, std::min({(rows + 15) / 16, int64_t(256), byMemory}));
}

/// Runs rowFn(xr, gr, outRow, acc) on every row of n elements (as doubles)
/// and stores outRow into dx; acc (nAcc x params doubles) is the row's
/// block partial. Returns the sum of the partials in block order.
template <class RowFn>
std::vector<double> normGradRows(const char *op, const TensorRef &x,
                                 const TensorRef &dy, const TensorRef &dx,
                                 int64_t n, int64_t accSize, RowFn &&rowFn) {
  int64_t rows = n ? x.numel() / n : 0;
  int64_t blocks = rowBlocks(rows, accSize);
  int64_t perBlock = (rows + blocks - 1) / blocks;
  std::vector<double> partial(static_cast<size_t>(blocks * accSize), 0.0);
  parallelFor(blocks, grainFor(perBlock * n * 16), [&](int64_t b0,
                                                       int64_t b1) {
    std::vector<double> xr(n), gr(n), out(n);
    for (int64_t b = b0; b < b1; ++b) {
      double *acc = &partial[b * accSize];
      for (int64_t r = b * perBlock, e = std::min(rows, r + perBlock); r < e;
           ++r) {
        // checkNormGrad made sure every operand is float.
        (void)loadDoubles(x, r * n, n, xr.data());
        (void)loadDoubles(dy, r * n, n, gr.data());
        rowFn(xr.data(), gr.data(), out.data(), acc);
        (void)storeDoubles(op, dx, r * n, n, out.data());
      }
    }
  });
  std::vector<double> total(static_cast<size_t>(accSize), 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t i = 0; i < accSize; ++i)
      total[i] += partial[b * accSize + i];
  return total;
}

Status storeRange(const char *op, const TensorRef &out,
                  const std::vector<double> &v, int64_t begin) {
  return storeDoubles(op, out, 0, out.numel(), v.data() + begin);
}

} // namespace

Status layerNormGrad(const TensorRef &x, const TensorRef &scale,
                     const TensorRef &dy, int64_t axis, float epsilon,
                     const TensorRef &dx, const TensorRef &dscale,
                     const TensorRef &dbias) {
  const char *op = "layer_norm_grad";
  std::vector<int64_t> norm;
  SMP_RETURN_IF_ERROR(
      common::checkNormGrad(op, x, scale, dy, axis, dx, dscale, &dbias, norm));
  int64_t n = product(norm), params = scale.numel();
  std::vector<int64_t> smap = broadcastIndex(norm, scale.shape);
  std::vector<double> w = toDouble(scale);
  std::vector<double> total = normGradRows(
      op, x, dy, dx, n, 2 * params,
      [&](const double *xr, const double *gr, double *out, double *acc) {
        double *ds = acc, *db = acc + params;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < n; ++j)
          mean += xr[j];
        mean /= n;
        for (int64_t j = 0; j < n; ++j)
          var += (xr[j] - mean) * (xr[j] - mean);
        var /= n;
        double rstd = 1.0 / std::sqrt(var + epsilon);
        double sumD = 0, sumDX = 0;
        for (int64_t j = 0; j < n; ++j) {
          double xhat = (xr[j] - mean) * rstd, d = gr[j] * w[smap[j]];
          sumD += d;
          sumDX += d * xhat;
          ds[smap[j]] += gr[j] * xhat;
          db[smap[j]] += gr[j];
        }
        for (int64_t j = 0; j < n; ++j) {
          double xhat = (xr[j] - mean) * rstd, d = gr[j] * w[smap[j]];
          out[j] = rstd * (d - sumD / n - xhat * sumDX / n);
        }
      });
  SMP_RETURN_IF_ERROR(storeRange(op, dscale, total, 0));
  return storeRange(op, dbias, total, params);
}

Status rmsNormGrad(const TensorRef &x, const TensorRef &scale,
                   const TensorRef &dy, float epsilon, const TensorRef &dx,
                   const TensorRef &dscale) {
  const char *op = "rms_norm_grad";
  std::vector<int64_t> norm;
  SMP_RETURN_IF_ERROR(
      common::checkNormGrad(op, x, scale, dy, -1, dx, dscale, nullptr, norm));
  int64_t n = x.shape.back();
  std::vector<int64_t> smap = broadcastIndex({n}, scale.shape);
  std::vector<double> w = toDouble(scale);
  std::vector<double> total = normGradRows(
      op, x, dy, dx, n, scale.numel(),
      [&](const double *xr, const double *gr, double *out, double *ds) {
        double ms = 0;
        for (int64_t j = 0; j < n; ++j)
          ms += xr[j] * xr[j];
        ms /= n;
        double rr = 1.0 / std::sqrt(ms + epsilon), dot = 0;
        for (int64_t j = 0; j < n; ++j) {
          dot += gr[j] * w[smap[j]] * xr[j];
          ds[smap[j]] += gr[j] * xr[j] * rr;
        }
        for (int64_t j = 0; j < n; ++j)
          out[j] = rr * (gr[j] * w[smap[j]] - xr[j] * rr * rr * dot / n);
      });
  return storeRange(op, dscale, total, 0);
}

} // namespace smp::kernels::cpu
