//===- Softmax.cpp - softmax and log_softmax along one axis ---------------===//
//
// Numerically stable: the max along the axis is subtracted first; the
// denominator accumulates in double. The input is viewed as
// [outer, n, inner]; rows (inner == 1) or column blocks (inner > 1) run in
// parallel.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "VecMath.h"

namespace smp::kernels::cpu {
using namespace detail;

namespace {

constexpr int64_t kBlock = 64; // inner columns per task when inner > 1

/// f32 rows (f16/bf16 widened into t first): max, exp(x - max) stored
/// with its sum (VecMath: vectorised, the difference taken exactly, the sum
/// in double), then one scaling pass over the row while it is in cache
/// (streamed to the output when that is large).
template <class S>
void softmaxRowsF32(const S *x, S *y, int64_t outer, int64_t n, bool log) {
  constexpr bool f32 = std::is_same_v<S, float>;
  bool stream = f32 && !log &&
                outer * n * static_cast<int64_t>(sizeof(S)) >= kStreamBytes;
  parallelFor(outer, grainFor(8 * n), [&](int64_t begin, int64_t end) {
    // t: the widened row (f16/bf16); u: the exp values when they do not go
    // straight to the output row.
    std::vector<float> t(f32 ? 0 : static_cast<size_t>(n));
    std::vector<float> u(log || stream ? static_cast<size_t>(n) : 0);
    for (int64_t r = begin; r < end; ++r) {
      const float *xr;
      if constexpr (f32) {
        xr = x + r * n;
      } else {
        for (int64_t i = 0; i < n; ++i)
          t[i] = Float<S>::load(x[r * n + i]);
        xr = t.data();
      }
      float m = vecMax(xr, n);
      float *e = u.data();
      if constexpr (f32) {
        if (!log && !stream)
          e = y + r * n;
      } else if (!log) {
        e = t.data(); // in place
      }
      double sum = vecExpSum(xr, e, n, m);
      float inv = static_cast<float>(1.0 / sum);
      if (log) {
        float ls = static_cast<float>(std::log(sum));
        for (int64_t i = 0; i < n; ++i)
          y[r * n + i] = Float<S>::store((xr[i] - m) - ls);
      } else if constexpr (f32) {
        vecScale(e, y + r * n, n, inv, stream);
      } else {
        for (int64_t i = 0; i < n; ++i)
          y[r * n + i] = Float<S>::store(e[i] * inv);
      }
    }
    if (stream)
      streamFence();
  });
}

/// f64 rows: the C library, sums in double.
void softmaxRowsF64(const double *x, double *y, int64_t outer, int64_t n,
                    bool log) {
  parallelFor(outer, grainFor(8 * n), [&](int64_t begin, int64_t end) {
    std::vector<double> t(static_cast<size_t>(n));
    for (int64_t r = begin; r < end; ++r) {
      const double *xr = x + r * n;
      double *yr = y + r * n;
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < n; ++i) {
        t[i] = xr[i];
        m = t[i] > m ? t[i] : m;
      }
      double sum = 0;
      if (log) {
        for (int64_t i = 0; i < n; ++i) {
          t[i] -= m;
          sum += std::exp(t[i]);
        }
        double ls = std::log(sum);
        for (int64_t i = 0; i < n; ++i)
          yr[i] = t[i] - ls;
      } else {
        for (int64_t i = 0; i < n; ++i) {
          t[i] = std::exp(t[i] - m);
          sum += t[i];
        }
        double inv = 1.0 / sum;
        for (int64_t i = 0; i < n; ++i)
          yr[i] = t[i] * inv;
      }
    }
  });
}

template <class S>
void softmaxStrided(const S *x, S *y, int64_t outer, int64_t n, int64_t inner,
                    bool log) {
  using C = typename Float<S>::C;
  int64_t blocks = (inner + kBlock - 1) / kBlock;
  parallelFor(outer * blocks, grainFor(8 * n * kBlock),
              [&](int64_t begin, int64_t end) {
                C m[kBlock];
                double sum[kBlock];
                for (int64_t task = begin; task < end; ++task) {
                  int64_t o = task / blocks, j0 = (task % blocks) * kBlock;
                  int64_t w = std::min(kBlock, inner - j0);
                  const S *xb = x + o * n * inner + j0;
                  S *yb = y + o * n * inner + j0;
                  for (int64_t j = 0; j < w; ++j) {
                    m[j] = -std::numeric_limits<C>::infinity();
                    sum[j] = 0;
                  }
                  for (int64_t i = 0; i < n; ++i)
                    for (int64_t j = 0; j < w; ++j) {
                      C v = Float<S>::load(xb[i * inner + j]);
                      m[j] = v > m[j] ? v : m[j];
                    }
                  for (int64_t i = 0; i < n; ++i)
                    for (int64_t j = 0; j < w; ++j)
                      sum[j] += static_cast<double>(
                          std::exp(Float<S>::load(xb[i * inner + j]) - m[j]));
                  for (int64_t i = 0; i < n; ++i)
                    for (int64_t j = 0; j < w; ++j) {
                      C v = Float<S>::load(xb[i * inner + j]) - m[j];
                      yb[i * inner + j] = Float<S>::store(
                          log ? v - static_cast<C>(std::log(sum[j]))
                              : static_cast<C>(std::exp(v) * (1.0 / sum[j])));
                    }
                }
              });
}

} // namespace

Status softmax(const TensorRef &in, int64_t axis, const TensorRef &out,
               bool log) {
  const char *name = log ? "log_softmax" : "softmax";
  common::AxisSplit s;
  SMP_RETURN_IF_ERROR(common::checkSoftmax(name, in, axis, out, s));
  if (in.rank() == 0) { // a scalar: softmax 1, log_softmax 0
    return visitFloat(in.dtype, name, [&](auto tag) {
      using S = typename decltype(tag)::type;
      using C = typename Float<S>::C;
      C v = Float<S>::load(*in.as<S>());
      *out.as<S>() = Float<S>::store(std::isnan(v) ? v : C(log ? 0 : 1));
      return Status::success();
    });
  }
  int64_t outer = s.outer, n = s.len, inner = s.inner;
  if (in.numel() == 0)
    return Status::success();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    if (inner == 1) {
      if constexpr (std::is_same_v<S, double>)
        softmaxRowsF64(in.as<S>(), out.as<S>(), outer, n, log);
      else
        softmaxRowsF32(in.as<S>(), out.as<S>(), outer, n, log);
    } else
      softmaxStrided(in.as<S>(), out.as<S>(), outer, n, inner, log);
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
