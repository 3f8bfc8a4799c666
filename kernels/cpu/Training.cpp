//===- Training.cpp - Backward and optimizer kernels ----------------------===//

#include "smp/kernels/cpu/Training.h"

#include "Common.h"

#include <cmath>
#include <cstring>

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

} // namespace

Status geluGrad(const TensorRef &x, const TensorRef &dy, bool tanhApprox,
                const TensorRef &dx) {
  const char *op = "gelu_grad";
  SMP_RETURN_IF_ERROR(common::checkGeluGrad(x, dy, dx));
  std::vector<double> xv = toDouble(x), g = toDouble(dy);
  const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
  parallelFor(static_cast<int64_t>(xv.size()), grainFor(20),
              [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                  double v = xv[i], d;
                  if (tanhApprox) {
                    double t = std::tanh(k * (v + c * v * v * v));
                    d = 0.5 * (1 + t) +
                        0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
                  } else {
                    d = 0.5 * (1 + std::erf(v / std::sqrt(2.0))) +
                        v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
                  }
                  g[i] *= d;
                }
              });
  return storeDouble(op, dx, g);
}

Status layerNormGrad(const TensorRef &x, const TensorRef &scale,
                     const TensorRef &dy, int64_t axis, float epsilon,
                     const TensorRef &dx, const TensorRef &dscale,
                     const TensorRef &dbias) {
  const char *op = "layer_norm_grad";
  std::vector<int64_t> norm;
  SMP_RETURN_IF_ERROR(
      common::checkNormGrad(op, x, scale, dy, axis, dx, dscale, &dbias, norm));
  int64_t n = product(norm), rows = n ? x.numel() / n : 0;
  std::vector<int64_t> smap = broadcastIndex(norm, scale.shape);
  std::vector<double> xv = toDouble(x), g = toDouble(dy), w = toDouble(scale);
  std::vector<double> out(xv.size()), ds(w.size(), 0.0), db(w.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &xv[r * n], *gr = &g[r * n];
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
      out[r * n + j] = rstd * (d - sumD / n - xhat * sumDX / n);
    }
  }
  SMP_RETURN_IF_ERROR(storeDouble(op, dx, out));
  SMP_RETURN_IF_ERROR(storeDouble(op, dscale, ds));
  return storeDouble(op, dbias, db);
}

Status rmsNormGrad(const TensorRef &x, const TensorRef &scale,
                   const TensorRef &dy, float epsilon, const TensorRef &dx,
                   const TensorRef &dscale) {
  const char *op = "rms_norm_grad";
  std::vector<int64_t> norm;
  SMP_RETURN_IF_ERROR(
      common::checkNormGrad(op, x, scale, dy, -1, dx, dscale, nullptr, norm));
  int64_t n = x.shape.back(), rows = n ? x.numel() / n : 0;
  std::vector<int64_t> smap = broadcastIndex({n}, scale.shape);
  std::vector<double> xv = toDouble(x), g = toDouble(dy), w = toDouble(scale);
  std::vector<double> out(xv.size()), ds(w.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const double *xr = &xv[r * n], *gr = &g[r * n];
    double ms = 0;
    for (int64_t j = 0; j < n; ++j)
      ms += xr[j] * xr[j];
    ms /= n;
    double rr = 1.0 / std::sqrt(ms + epsilon), dot = 0;
    for (int64_t j = 0; j < n; ++j) {
      double d = gr[j] * w[smap[j]];
      dot += d * xr[j];
      ds[smap[j]] += gr[j] * xr[j] * rr;
    }
    for (int64_t j = 0; j < n; ++j)
      out[r * n + j] =
          rr * (gr[j] * w[smap[j]] - xr[j] * rr * rr * dot / n);
  }
  SMP_RETURN_IF_ERROR(storeDouble(op, dx, out));
  return storeDouble(op, dscale, ds);
}

namespace {

/// dlogits row by row (in parallel: rows are independent) from the logits,
/// in double: scale[r] * (softmax(x_r) - onehot(label_r)), 0 for ignored
/// rows. Nothing the size of the logits is allocated (at T = 16384 and a
/// 50257-word vocabulary a double copy of logits and gradient was 13 GB
/// outside the arena).
template <class SX, class SO>
void crossEntropyGradRows(const SX *x, SO *o, const std::vector<int64_t> &lab,
                          const std::vector<double> &scale,
                          int64_t ignoreIndex, int64_t classes) {
  using CO = typename Float<SO>::C;
  int64_t rows = static_cast<int64_t>(lab.size());
  parallelFor(rows, grainFor(8 * classes), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      SO *orow = o + r * classes;
      if (lab[r] == ignoreIndex) {
        std::fill_n(orow, classes, Float<SO>::store(CO(0)));
        continue;
      }
      const SX *xr = x + r * classes;
      auto xc = [&](int64_t c) {
        return static_cast<double>(Float<SX>::load(xr[c]));
      };
      double m = -INFINITY, sum = 0;
      for (int64_t c = 0; c < classes; ++c)
        m = std::max(m, xc(c));
      for (int64_t c = 0; c < classes; ++c)
        sum += std::exp(xc(c) - m);
      for (int64_t c = 0; c < classes; ++c)
        orow[c] = Float<SO>::store(static_cast<CO>(
            scale[r] *
            (std::exp(xc(c) - m) / sum - (c == lab[r] ? 1.0 : 0.0))));
    }
  });
}

} // namespace

Status crossEntropyGrad(const TensorRef &logits, const TensorRef &labels,
                        const TensorRef *weights, const TensorRef &dloss,
                        int64_t ignoreIndex, Reduction reduction,
                        const TensorRef &dlogits) {
  const char *op = "cross_entropy_grad";
  int64_t classes, rows;
  SMP_RETURN_IF_ERROR(common::checkCrossEntropyGrad(
      logits, labels, weights, dloss, reduction != Reduction::None, dlogits,
      classes, rows));
  std::vector<double> w = weights ? toDouble(*weights) : std::vector<double>();
  std::vector<double> g = toDouble(dloss);
  double counted = 0;
  std::vector<int64_t> lab(rows);
  for (int64_t r = 0; r < rows; ++r) {
    lab[r] = loadInt(labels, r);
    if (lab[r] == ignoreIndex)
      continue;
    if (lab[r] < 0 || lab[r] >= classes)
      return fail(op, "label " + std::to_string(lab[r]) + " at position " +
                          std::to_string(r) + " is outside [0, " +
                          std::to_string(classes) + ")");
    counted += weights ? w[lab[r]] : 1.0;
  }
  std::vector<double> scale(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    if (lab[r] == ignoreIndex)
      continue;
    scale[r] = reduction == Reduction::None ? g[r] : g[0];
    if (reduction == Reduction::Mean)
      scale[r] /= counted;
    if (weights)
      scale[r] *= w[lab[r]];
  }
  return visitFloat(logits.dtype, op, [&](auto xtag) {
    using SX = typename decltype(xtag)::type;
    return visitFloat(dlogits.dtype, op, [&](auto otag) {
      using SO = typename decltype(otag)::type;
      crossEntropyGradRows(logits.as<SX>(), dlogits.as<SO>(), lab, scale,
                           ignoreIndex, classes);
      return Status::success();
    });
  });
}

Status gatherGrad(const TensorRef &indices, const TensorRef &dy, int64_t axis,
                  const TensorRef &out) {
  const char *op = "gather_grad";
  GatherGradGeom geom;
  SMP_RETURN_IF_ERROR(common::checkGatherGrad(indices, dy, axis, out, geom));
  int64_t outer = geom.outer, dim = geom.dim, inner = geom.inner,
          k = geom.count;
  std::vector<double> g = toDouble(dy), acc(out.numel(), 0.0);
  for (int64_t j = 0; j < k; ++j) {
    int64_t idx = loadInt(indices, j);
    if (idx < -dim || idx >= dim)
      return fail(op, "index " + std::to_string(idx) + " out of range");
    if (idx < 0)
      idx += dim;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        acc[(o * dim + idx) * inner + i] += g[(o * k + j) * inner + i];
  }
  return storeDouble(op, out, acc);
}

Status sliceGrad(const TensorRef &dy, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, const TensorRef &out) {
  const char *op = "slice_grad";
  SMP_RETURN_IF_ERROR(checkTensor(op, "grad", dy));
  if (dy.dtype != out.dtype || dy.rank() != out.rank() ||
      static_cast<int64_t>(starts.size()) != out.rank() ||
      static_cast<int64_t>(steps.size()) != out.rank())
    return fail(op, "grad, starts and steps must match the input's rank");
  size_t esize = smp::base::dtypeSize(out.dtype);
  std::memset(out.data, 0, out.bytes());
  std::vector<int64_t> idx(dy.rank(), 0), strides(out.rank(), 1);
  for (int64_t d = out.rank() - 1; d > 0; --d)
    strides[d - 1] = strides[d] * out.shape[d];
  const char *src = static_cast<const char *>(dy.data);
  char *dst = static_cast<char *>(out.data);
  for (int64_t k = 0, n = dy.numel(); k < n; ++k) {
    int64_t o = 0;
    for (int64_t d = 0; d < dy.rank(); ++d) {
      int64_t p = starts[d] + idx[d] * steps[d];
      if (p < 0 || p >= out.shape[d])
        return fail(op, "slice position outside the input");
      o += p * strides[d];
    }
    std::memcpy(dst + o * esize, src + k * esize, esize);
    for (int64_t d = dy.rank(); d-- > 0;) {
      if (++idx[d] < dy.shape[d])
        break;
      idx[d] = 0;
    }
  }
  return Status::success();
}

namespace {

/// Input offset of kernel tap `k` at output position `o` (flat) of window
/// w, or -1 when it falls in the padding. `inPadded` tells whether it is
/// inside [-padBegin, in + padEnd).
int64_t tap(const Window &w, int64_t o, int64_t k, bool *inPadded = nullptr) {
  int64_t offset = 0, spatial = static_cast<int64_t>(w.dims);
  bool inside = true, padded = true;
  for (int64_t d = spatial; d-- > 0;) {
    int64_t od = o % w.out[d], kd = k % w.kernel[d];
    o /= w.out[d];
    k /= w.kernel[d];
    int64_t i = od * w.strides[d] - w.padBegin[d] + kd * w.dilations[d];
    if (i < 0 || i >= w.in[d])
      inside = false;
    if (i < -w.padBegin[d] || i >= w.in[d] + w.padEnd[d])
      padded = false;
    int64_t stride = 1;
    for (int64_t e = d + 1; e < spatial; ++e)
      stride *= w.in[e];
    offset += i * stride;
  }
  if (inPadded)
    *inPadded = padded;
  return inside ? offset : -1;
}

/// The CPU takes windows of any number of spatial dims.
constexpr size_t kAnyDims = SIZE_MAX;

} // namespace

Status convGrad(const TensorRef &x, const TensorRef &weight,
                const TensorRef &dy, const std::vector<int64_t> &strides,
                const std::vector<int64_t> &pads,
                const std::vector<int64_t> &dilations, int64_t group,
                const TensorRef &dx, const TensorRef &dweight) {
  const char *op = "conv_grad";
  Window w;
  SMP_RETURN_IF_ERROR(common::checkConvGrad(x, weight, dy, strides, pads,
                                            dilations, group, dx, dweight,
                                            kAnyDims, w));
  int64_t n = x.shape[0], c = x.shape[1], m = weight.shape[0];
  int64_t cg = c / group, mg = m / group;
  std::vector<double> xv = toDouble(x), wv = toDouble(weight),
                      g = toDouble(dy), gx(xv.size(), 0.0), gw(wv.size(), 0.0);
  // Kernel tap offsets per output position are recomputed; fine for the
  // model sizes the CPU backend trains.
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < m; ++oc) {
      int64_t grp = oc / mg;
      for (int64_t o = 0; o < w.outSize; ++o) {
        double go = g[(b * m + oc) * w.outSize + o];
        if (go == 0)
          continue;
        for (int64_t k = 0; k < w.kernelSize; ++k) {
          int64_t i = tap(w, o, k);
          if (i < 0)
            continue;
          for (int64_t ic = 0; ic < cg; ++ic) {
            int64_t xi = (b * c + grp * cg + ic) * w.inSize + i;
            int64_t wi = (oc * cg + ic) * w.kernelSize + k;
            gx[xi] += go * wv[wi];
            gw[wi] += go * xv[xi];
          }
        }
      }
    }
  SMP_RETURN_IF_ERROR(storeDouble(op, dx, gx));
  return storeDouble(op, dweight, gw);
}

Status poolGrad(bool max, const TensorRef &x, const TensorRef &dy,
                const std::vector<int64_t> &kernel,
                const std::vector<int64_t> &strides,
                const std::vector<int64_t> &pads,
                const std::vector<int64_t> &dilations, bool countIncludePad,
                const TensorRef &dx) {
  const char *op = "pool_grad";
  Window w;
  SMP_RETURN_IF_ERROR(common::checkPoolGrad(x, dy, kernel, strides, pads,
                                            dilations, dx, kAnyDims, w));
  int64_t planes = x.shape[0] * x.shape[1];
  std::vector<double> xv = toDouble(x), g = toDouble(dy), gx(xv.size(), 0.0);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t o = 0; o < w.outSize; ++o) {
      double go = g[p * w.outSize + o];
      if (max) {
        int64_t best = -1;
        for (int64_t k = 0; k < w.kernelSize; ++k) {
          int64_t i = tap(w, o, k);
          if (i >= 0 && (best < 0 || xv[p * w.inSize + i] >
                                         xv[p * w.inSize + best]))
            best = i;
        }
        if (best >= 0)
          gx[p * w.inSize + best] += go;
        continue;
      }
      int64_t divisor = 0;
      for (int64_t k = 0; k < w.kernelSize; ++k) {
        bool padded;
        int64_t i = tap(w, o, k, &padded);
        divisor += countIncludePad ? (padded ? 1 : 0) : (i >= 0 ? 1 : 0);
      }
      if (divisor == 0)
        continue;
      for (int64_t k = 0; k < w.kernelSize; ++k) {
        int64_t i = tap(w, o, k);
        if (i >= 0)
          gx[p * w.inSize + i] += go / static_cast<double>(divisor);
      }
    }
  return storeDouble(op, dx, gx);
}

Status sgdUpdate(const TensorRef &param, const TensorRef &grad,
                 const TensorRef &buffer, double lr, double step,
                 const SgdOptions &o, const TensorRef &newParam,
                 const TensorRef &newBuffer) {
  const char *op = "sgd_update";
  SMP_RETURN_IF_ERROR(
      common::checkSgd(param, grad, buffer, newParam, newBuffer));
  std::vector<double> p = toDouble(param), g = toDouble(grad),
                      buf = toDouble(buffer);
  for (size_t i = 0; i < p.size(); ++i) {
    double d = g[i];
    if (o.weightDecay != 0)
      d += o.weightDecay * p[i];
    if (o.momentum != 0) {
      buf[i] = step <= 1 ? d : o.momentum * buf[i] + (1 - o.dampening) * d;
      d = o.nesterov ? d + o.momentum * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
  SMP_RETURN_IF_ERROR(storeDouble(op, newParam, p));
  return o.momentum != 0 ? storeDouble(op, newBuffer, buf)
                         : Status::success();
}

Status adamUpdate(const TensorRef &param, const TensorRef &grad,
                  const TensorRef &expAvg, const TensorRef &expAvgSq,
                  double lr, double step, const AdamOptions &o,
                  const TensorRef &newParam, const TensorRef &newExpAvg,
                  const TensorRef &newExpAvgSq) {
  const char *op = "adam_update";
  SMP_RETURN_IF_ERROR(common::checkAdam(op, param, grad, expAvg, expAvgSq,
                                        newParam, newExpAvg, newExpAvgSq));
  double bc1 = 1 - std::pow(o.beta1, step), bc2 = 1 - std::pow(o.beta2, step);
  double stepSize = lr / bc1, bc2Sqrt = std::sqrt(bc2);
  // Streamed in chunks of doubles on the stack, chunks in parallel: no
  // whole-tensor copies, each element the same double arithmetic as before
  // (the same bits for any thread count; outputs may alias inputs).
  constexpr int64_t kChunk = 512;
  int64_t n = param.numel(), chunks = (n + kChunk - 1) / kChunk;
  parallelFor(chunks, grainFor(kChunk * 24), [&](int64_t cb, int64_t ce) {
    double p[kChunk], g[kChunk], m[kChunk], v[kChunk];
    for (int64_t c = cb; c < ce; ++c) {
      int64_t i0 = c * kChunk, len = std::min(kChunk, n - i0);
      // checkAdam made sure every operand is float: the loads cannot fail.
      (void)loadDoubles(param, i0, len, p);
      (void)loadDoubles(grad, i0, len, g);
      (void)loadDoubles(expAvg, i0, len, m);
      (void)loadDoubles(expAvgSq, i0, len, v);
      for (int64_t i = 0; i < len; ++i) {
        double gi = g[i];
        if (o.decoupled)
          p[i] *= 1 - lr * o.weightDecay;
        else if (o.weightDecay != 0)
          gi += o.weightDecay * p[i];
        m[i] += (1 - o.beta1) * (gi - m[i]);
        v[i] = v[i] * o.beta2 + (1 - o.beta2) * gi * gi;
        p[i] -= stepSize * m[i] / (std::sqrt(v[i]) / bc2Sqrt + o.epsilon);
      }
      (void)storeDoubles(op, newParam, i0, len, p);
      (void)storeDoubles(op, newExpAvg, i0, len, m);
      (void)storeDoubles(op, newExpAvgSq, i0, len, v);
    }
  });
  return Status::success();
}

} // namespace smp::kernels::cpu
