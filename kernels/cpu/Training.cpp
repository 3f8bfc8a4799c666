//===- Training.cpp - Backward and optimizer kernels ----------------------===//

#include "smp/kernels/cpu/Training.h"

#include "Common.h"
#include "VecMath.h"

#include <cmath>
#include <cstring>

namespace smp::kernels::cpu {
using namespace detail;

namespace {

/// Streams elements [0, n) through K arrays of doubles on the stack, chunks
/// in parallel: f(begin, len, bufs) with bufs[k] of kChunk doubles. No
/// whole-tensor copies; elementwise work gives the same bits for any thread
/// count.
constexpr int64_t kChunk = 512;
template <int K, class F>
void streamChunks(int64_t n, int64_t costPerItem, F &&f) {
  int64_t chunks = (n + kChunk - 1) / kChunk;
  parallelFor(chunks, grainFor(kChunk * costPerItem),
              [&](int64_t cb, int64_t ce) {
                double bufs[K][kChunk];
                for (int64_t c = cb; c < ce; ++c) {
                  int64_t i0 = c * kChunk;
                  f(i0, std::min(kChunk, n - i0), bufs);
                }
              });
}

bool allF32(std::initializer_list<const TensorRef *> ts) {
  for (const TensorRef *t : ts)
    if (t->dtype != DType::F32)
      return false;
  return true;
}

} // namespace

namespace {

/// dx[i0, i0 + len) = dy * gelu'(x) there, len <= kChunk; buf: two rows of
/// kChunk doubles for the paths that compute in double. The f32 tanh path is
/// elementwise in VecMath (the same bits however the range is cut).
void geluGradRange(const TensorRef &x, const TensorRef &dy, bool tanhApprox,
                   const TensorRef &dx, int64_t i0, int64_t len,
                   double (*buf)[kChunk]) {
  if (tanhApprox && allF32({&x, &dy, &dx})) {
    vecGeluTanhGrad(x.as<float>() + i0, dy.as<float>() + i0,
                    dx.as<float>() + i0, len);
    return;
  }
  double *xv = buf[0], *g = buf[1];
  // checkGeluGrad made sure every operand is float: these cannot fail.
  (void)loadDoubles(x, i0, len, xv);
  (void)loadDoubles(dy, i0, len, g);
  for (int64_t i = 0; i < len; ++i) {
    double v = xv[i], d;
    if (tanhApprox) {
      d = geluTanhDerivative(v);
    } else {
      // erfc: 1 + erf(x) cancels for negative x.
      d = 0.5 * std::erfc(-v / std::sqrt(2.0)) +
          v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    }
    g[i] *= d;
  }
  (void)storeDoubles("gelu_grad", dx, i0, len, g);
}

} // namespace

Status geluGrad(const TensorRef &x, const TensorRef &dy, bool tanhApprox,
                const TensorRef &dx) {
  SMP_RETURN_IF_ERROR(common::checkGeluGrad(x, dy, dx));
  int64_t n = x.numel();
  if (tanhApprox && allF32({&x, &dy, &dx})) {
    const float *xp = x.as<float>(), *gp = dy.as<float>();
    float *op32 = dx.as<float>();
    parallelFor(n, grainFor(24), [&](int64_t b, int64_t e) {
      vecGeluTanhGrad(xp + b, gp + b, op32 + b, e - b);
    });
    return Status::success();
  }
  streamChunks<2>(n, 40, [&](int64_t i0, int64_t len, double (*buf)[kChunk]) {
    geluGradRange(x, dy, tanhApprox, dx, i0, len, buf);
  });
  return Status::success();
}

/// dx row by row, each row added (as stored) into its row block's column
/// sums: sumRowBlocks, as reduce(Sum) over the leading dims sums, so the
/// bits are geluGrad's then reduce's.
Status biasGeluGrad(const TensorRef &x, const TensorRef &dy, bool tanhApprox,
                    const TensorRef &dx, const TensorRef &dbias) {
  SMP_RETURN_IF_ERROR(common::checkBiasGeluGrad(x, dy, dx, dbias));
  int64_t cols = x.shape.back(), rows = cols ? x.numel() / cols : 0;
  std::vector<double> sums = sumRowBlocks(
      rows, cols, cols * 24, [&](int64_t r0, int64_t r1, double *acc) {
        double buf[2][kChunk];
        for (int64_t r = r0; r < r1; ++r) {
          for (int64_t j0 = 0; j0 < cols; j0 += kChunk) {
            int64_t i0 = r * cols + j0, w = std::min(kChunk, cols - j0);
            geluGradRange(x, dy, tanhApprox, dx, i0, w, buf);
            if (dx.dtype == DType::F32) {
              const float *d = dx.as<float>() + i0;
              for (int64_t j = 0; j < w; ++j)
                acc[j0 + j] += static_cast<double>(d[j]);
            } else {
              (void)loadDoubles(dx, i0, w, buf[0]);
              for (int64_t j = 0; j < w; ++j)
                acc[j0 + j] += buf[0][j];
            }
          }
        }
      });
  return visitFloat(dbias.dtype, "bias_gelu_grad", [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename Float<S>::C;
    S *out = dbias.as<S>();
    for (int64_t j = 0; j < cols; ++j)
      out[j] = Float<S>::store(static_cast<C>(sums[j]));
    return Status::success();
  });
}

namespace {

/// dlogits row by row (in parallel: rows are independent) from the logits:
/// scale[r] * (softmax(x_r) - onehot(label_r)), 0 for ignored rows, the
/// exponentials summed in double. f32, f16 and bf16 through VecMath in f32
/// (16-bit logits widened per row, a 16-bit gradient rounded from the f32
/// row: the bits of the f32 kernel on a cast copy, then a cast; f32
/// outputs past kStreamBytes with streaming stores); f64 in double. Nothing
/// the size of the logits is allocated (at T = 16384 and a 50257-word
/// vocabulary a double copy of logits and gradient was 13 GB outside the
/// arena). A row of `stride` values past its `classes` is padding: its
/// gradient there is zero.
template <class SX, class SO>
void crossEntropyGradRows(const SX *x, SO *o, const std::vector<int64_t> &lab,
                          const std::vector<double> &scale, int64_t ignoreIndex,
                          int64_t classes, int64_t stride) {
  using CO = typename Float<SO>::C;
  int64_t rows = static_cast<int64_t>(lab.size());
  constexpr bool viaF32 = std::is_same_v<typename Float<SX>::C, float> &&
                          std::is_same_v<CO, float>;
  constexpr bool f32Out = std::is_same_v<SO, float>;
  bool stream =
      f32Out && viaF32 && rows * stride * int64_t(sizeof(SO)) >= kStreamBytes;
  parallelFor(rows, grainFor(8 * classes), [&](int64_t begin, int64_t end) {
    std::vector<float> e(viaF32 ? static_cast<size_t>(classes) : 0), wide;
    std::vector<float> row(viaF32 && !f32Out ? static_cast<size_t>(classes) : 0);
    for (int64_t r = begin; r < end; ++r) {
      SO *orow = o + r * stride;
      std::fill(orow + classes, orow + stride, Float<SO>::store(CO(0)));
      if (lab[r] == ignoreIndex) {
        std::fill_n(orow, classes, Float<SO>::store(CO(0)));
        continue;
      }
      const SX *xr = x + r * stride;
      if constexpr (viaF32) {
        const float *xf = widenRow(xr, wide, classes);
        float *of;
        if constexpr (f32Out)
          of = orow;
        else
          of = row.data();
        double sum = vecExpSum(xf, e.data(), classes, vecMax(xf, classes));
        vecScale(e.data(), of, classes, static_cast<float>(scale[r] / sum),
                 stream);
        if (stream)
          streamFence(); // before the plain store into the same row
        of[lab[r]] = static_cast<float>(
            scale[r] * (static_cast<double>(e[lab[r]]) / sum - 1.0));
        if constexpr (!f32Out)
          for (int64_t c = 0; c < classes; ++c)
            orow[c] = Float<SO>::store(of[c]);
        continue;
      }
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
                        const TensorRef &dlogits, int64_t requested) {
  const char *op = "cross_entropy_grad";
  int64_t classes, stride, rows;
  SMP_RETURN_IF_ERROR(common::checkCrossEntropyGrad(
      logits, labels, weights, dloss, reduction != Reduction::None, dlogits,
      requested, classes, stride, rows));
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
                           ignoreIndex, classes, stride);
      return Status::success();
    });
  });
}

/// The loss first: the gradient may take the logits' storage.
Status crossEntropyWithGrad(const TensorRef &logits, const TensorRef &labels,
                            const TensorRef *weights, const TensorRef &dloss,
                            int64_t ignoreIndex, Reduction reduction,
                            const TensorRef &loss, const TensorRef &dlogits,
                            int64_t classes) {
  SMP_RETURN_IF_ERROR(crossEntropy(logits, labels, ignoreIndex, reduction, loss,
                                   weights, classes));
  return crossEntropyGrad(logits, labels, weights, dloss, ignoreIndex,
                          reduction, dlogits, classes);
}

Status gatherGrad(const TensorRef &indices, const TensorRef &dy, int64_t axis,
                  const TensorRef &out) {
  const char *op = "gather_grad";
  GatherGradGeom geom;
  SMP_RETURN_IF_ERROR(common::checkGatherGrad(indices, dy, axis, out, geom));
  int64_t outer = geom.outer, dim = geom.dim, inner = geom.inner,
          k = geom.count;
  // The positions that gathered each row, in order (a counting sort): each
  // output row then sums its own dy rows, rows in parallel, in the same
  // order for any thread count.
  std::vector<int64_t> first(static_cast<size_t>(dim) + 1, 0), hits(k);
  for (int64_t j = 0; j < k; ++j) {
    int64_t idx = loadInt(indices, j);
    if (idx < -dim || idx >= dim)
      return fail(op, "index " + std::to_string(idx) + " out of range");
    hits[j] = idx < 0 ? idx + dim : idx;
    ++first[hits[j] + 1];
  }
  for (int64_t d = 0; d < dim; ++d)
    first[d + 1] += first[d];
  std::vector<int64_t> order(k), fill(first.begin(), first.end() - 1);
  for (int64_t j = 0; j < k; ++j)
    order[fill[hits[j]]++] = j;
  parallelFor(outer * dim, grainFor(std::max<int64_t>(inner, 1) * 4),
              [&](int64_t b, int64_t e) {
                std::vector<double> acc(inner), row(inner);
                for (int64_t od = b; od < e; ++od) {
                  int64_t o = od / dim, d = od % dim;
                  std::fill(acc.begin(), acc.end(), 0.0);
                  for (int64_t h = first[d]; h < first[d + 1]; ++h) {
                    // checkGatherGrad made sure dy and out are float.
                    (void)loadDoubles(dy, (o * k + order[h]) * inner, inner,
                                      row.data());
                    for (int64_t i = 0; i < inner; ++i)
                      acc[i] += row[i];
                  }
                  (void)storeDoubles(op, out, od * inner, inner, acc.data());
                }
              });
  return Status::success();
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

Status sgdUpdate(const TensorRef &param, const TensorRef &grad,
                 const TensorRef &buffer, double lr, double step,
                 const SgdOptions &o, const TensorRef &newParam,
                 const TensorRef &newBuffer) {
  const char *op = "sgd_update";
  SMP_RETURN_IF_ERROR(
      common::checkSgd(param, grad, buffer, newParam, newBuffer));
  bool momentum = o.momentum != 0;
  // Outputs may alias inputs: each chunk is read before it is written.
  streamChunks<3>(param.numel(), 12,
                  [&](int64_t i0, int64_t len, double (*buf)[kChunk]) {
                    double *p = buf[0], *g = buf[1], *m = buf[2];
                    // checkSgd made sure every operand is float.
                    (void)loadDoubles(param, i0, len, p);
                    (void)loadDoubles(grad, i0, len, g);
                    if (momentum)
                      (void)loadDoubles(buffer, i0, len, m);
                    for (int64_t i = 0; i < len; ++i) {
                      double d = g[i];
                      if (o.weightDecay != 0)
                        d += o.weightDecay * p[i];
                      if (momentum) {
                        m[i] = step <= 1 ? d
                                         : o.momentum * m[i] +
                                               (1 - o.dampening) * d;
                        d = o.nesterov ? d + o.momentum * m[i] : m[i];
                      }
                      p[i] -= lr * d;
                    }
                    (void)storeDoubles(op, newParam, i0, len, p);
                    if (momentum)
                      (void)storeDoubles(op, newBuffer, i0, len, m);
                  });
  return Status::success();
}

Status adamUpdate(const TensorRef &param, const TensorRef &grad,
                  const TensorRef &expAvg, const TensorRef &expAvgSq,
                  double lr, double step, const AdamOptions &o,
                  const TensorRef &newParam, const TensorRef &newExpAvg,
                  const TensorRef &newExpAvgSq) {
  const char *op = "adam_update";
  SMP_RETURN_IF_ERROR(common::checkAdam(op, param, grad, expAvg, expAvgSq,
                                        newParam, newExpAvg, newExpAvgSq));
  AdamStep s;
  s.decoupled = o.decoupled;
  s.decay = 1 - lr * o.weightDecay;
  s.weightDecay = o.weightDecay;
  s.oneMinusBeta1 = 1 - o.beta1;
  s.beta2 = o.beta2;
  s.oneMinusBeta2 = 1 - o.beta2;
  s.stepSize = lr / (1 - std::pow(o.beta1, step));
  s.bc2Sqrt = std::sqrt(1 - std::pow(o.beta2, step));
  s.epsilon = o.epsilon;
  // f32 states (the gradient f32, or f16/bf16 under smp-fuse-grad-casts):
  // the f32 path a chunk at a time, a 16-bit gradient widened into it (the
  // bits of its f32 copy's step).
  if (allF32({&param, &expAvg, &expAvgSq, &newParam, &newExpAvg,
              &newExpAvgSq}) &&
      grad.dtype != DType::F64)
    return visitFloat(grad.dtype, op, [&](auto tag) {
      using G = typename decltype(tag)::type;
      if constexpr (std::is_same_v<typename Float<G>::C, float>) {
        parallelFor(param.numel(), grainFor(24), [&](int64_t b, int64_t e) {
          std::vector<float> wide;
          for (int64_t i = b; i < e; i += kChunk) {
            int64_t n = std::min<int64_t>(kChunk, e - i);
            AdamArrays a{param.as<float>() + i,
                         widenRow(grad.as<G>() + i, wide, n),
                         expAvg.as<float>() + i,
                         expAvgSq.as<float>() + i,
                         newParam.as<float>() + i,
                         newExpAvg.as<float>() + i,
                         newExpAvgSq.as<float>() + i};
            vecAdam(s, a, n);
          }
        });
      }
      return Status::success();
    });
  // Other types: the same element step in double, through chunks (the same
  // bits for any thread count; outputs may alias inputs).
  streamChunks<4>(param.numel(), 24, [&](int64_t i0, int64_t len,
                                         double (*buf)[kChunk]) {
    double *p = buf[0], *g = buf[1], *m = buf[2], *v = buf[3];
    // checkAdam made sure every operand is float: the loads cannot fail.
    (void)loadDoubles(param, i0, len, p);
    (void)loadDoubles(grad, i0, len, g);
    (void)loadDoubles(expAvg, i0, len, m);
    (void)loadDoubles(expAvgSq, i0, len, v);
    for (int64_t i = 0; i < len; ++i)
      adamElement(s, p[i], g[i], m[i], v[i]);
    (void)storeDoubles(op, newParam, i0, len, p);
    (void)storeDoubles(op, newExpAvg, i0, len, m);
    (void)storeDoubles(op, newExpAvgSq, i0, len, v);
  });
  return Status::success();
}

} // namespace smp::kernels::cpu
