//===- Conv.cu - N-d grouped convolution, pooling and their gradients -----===//
//
// Direct kernels, one thread per output element, for the small CNN fixtures
// (correctness over speed; no im2col, no cuDNN):
//  * conv: sum over the group's input channels and the kernel taps that
//    fall inside the input (f32 accumulation, f64 for f64), plus the bias;
//  * pools: the taps inside the input (max propagates NaN; average divides
//    by the CPU's divisor);
//  * gradients gather instead of scatter (no atomics, deterministic): each
//    input element sums the outputs whose window holds it (a tap k maps
//    input i to output (i + pad - k * dilation) / stride when that divides
//    exactly); each weight sums over the batch and output positions. They
//    accumulate in f64, like the CPU.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

/// Spatial geometry of a sliding-window op (device copyable).
struct Win {
  int dims = 0;
  int64_t in[kMaxRank], out[kMaxRank], kernel[kMaxRank], stride[kMaxRank],
      padB[kMaxRank], padE[kMaxRank], dil[kMaxRank];
  int64_t inSize = 1, outSize = 1, kernelSize = 1;

  /// Unravels flat spatial index v over sizes s.
  __device__ void unravel(int64_t v, const int64_t *s, int64_t *idx) const {
    for (int d = dims - 1; d >= 0; --d) {
      idx[d] = v % s[d];
      v /= s[d];
    }
  }
  /// Input offset of tap k of output o, or -1 outside the input; `padded`
  /// tells whether it lies inside [-padB, in + padE).
  __device__ int64_t tap(const int64_t *o, int64_t k, bool &padded) const {
    int64_t kk[kMaxRank];
    unravel(k, kernel, kk);
    int64_t off = 0;
    bool inside = true;
    padded = true;
    for (int d = 0; d < dims; ++d) {
      int64_t i = o[d] * stride[d] - padB[d] + kk[d] * dil[d];
      if (i < 0 || i >= in[d])
        inside = false;
      if (i < -padB[d] || i >= in[d] + padE[d])
        padded = false;
      off = off * in[d] + i;
    }
    return inside ? off : -1;
  }
  /// The output that tap k of input position i (coords) belongs to, or -1.
  __device__ int64_t outputOf(const int64_t *i, int64_t k) const {
    int64_t kk[kMaxRank];
    unravel(k, kernel, kk);
    int64_t o = 0;
    for (int d = 0; d < dims; ++d) {
      int64_t num = i[d] + padB[d] - kk[d] * dil[d];
      if (num < 0 || num % stride[d] != 0)
        return -1;
      int64_t od = num / stride[d];
      if (od >= out[d])
        return -1;
      o = o * out[d] + od;
    }
    return o;
  }
  /// Calls f(k, o) for each output o whose window holds input position i
  /// (flat, spatial), at tap k, in tap order.
  template <class F> __device__ void forEachWindowOf(int64_t i, F &&f) const {
    int64_t ii[kMaxRank];
    unravel(i, in, ii);
    for (int64_t k = 0; k < kernelSize; ++k)
      if (int64_t o = outputOf(ii, k); o >= 0)
        f(k, o);
  }
};

/// The device copy of a common::Window (at most kMaxRank spatial dims).
Win toWin(const common::Window &cw) {
  Win w;
  w.dims = static_cast<int>(cw.dims);
  for (size_t d = 0; d < cw.dims; ++d) {
    w.in[d] = cw.in[d];
    w.out[d] = cw.out[d];
    w.kernel[d] = cw.kernel[d];
    w.stride[d] = cw.strides[d];
    w.padB[d] = cw.padBegin[d];
    w.padE[d] = cw.padEnd[d];
    w.dil[d] = cw.dilations[d];
  }
  w.inSize = cw.inSize;
  w.outSize = cw.outSize;
  w.kernelSize = cw.kernelSize;
  return w;
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <class S>
__global__ void convKernel(const S *x, const S *wt, In bias, S *y, Win w,
                           int64_t channels, int64_t outChannels, int64_t group,
                           int64_t n) {
  using C = typename FT<S>::C;
  int64_t cg = channels / group, mg = outChannels / group;
  SMP_GRID_STRIDE(t, n) {
    int64_t o = t % w.outSize, plane = t / w.outSize;
    int64_t m = plane % outChannels, b = plane / outChannels, g = m / mg;
    int64_t oc[kMaxRank];
    w.unravel(o, w.out, oc);
    C acc = C(0);
    for (int64_t k = 0; k < w.kernelSize; ++k) {
      bool padded;
      int64_t i = w.tap(oc, k, padded);
      if (i < 0)
        continue;
      for (int64_t ic = 0; ic < cg; ++ic)
        acc += FT<S>::load(x[(b * channels + g * cg + ic) * w.inSize + i]) *
               FT<S>::load(wt[(m * cg + ic) * w.kernelSize + k]);
    }
    if (bias.p)
      acc += static_cast<C>(bias.load(m));
    y[t] = FT<S>::store(acc);
  }
}

template <class S>
__global__ void poolKernel(const S *x, S *y, Win w, bool isMax,
                           bool countIncludePad, int64_t n) {
  using C = typename FT<S>::C;
  SMP_GRID_STRIDE(t, n) {
    int64_t o = t % w.outSize, plane = t / w.outSize;
    int64_t oc[kMaxRank];
    w.unravel(o, w.out, oc);
    const S *xp = x + plane * w.inSize;
    C best = -std::numeric_limits<C>::infinity();
    double sum = 0;
    int64_t inside = 0, padded = 0;
    for (int64_t k = 0; k < w.kernelSize; ++k) {
      bool pad;
      int64_t i = w.tap(oc, k, pad);
      padded += pad ? 1 : 0;
      if (i < 0)
        continue;
      ++inside;
      C v = FT<S>::load(xp[i]);
      if (isMax)
        best = MaxOp{}(best, v);
      else
        sum += static_cast<double>(v);
    }
    if (isMax)
      y[t] = FT<S>::store(best);
    else
      y[t] = FT<S>::store(static_cast<C>(
          sum / static_cast<double>(countIncludePad ? padded : inside)));
  }
}

} // namespace

Status conv(const TensorRef &in, const TensorRef &weight, const TensorRef *bias,
            const std::vector<int64_t> &strides,
            const std::vector<int64_t> &pads,
            const std::vector<int64_t> &dilations, int64_t group,
            const TensorRef &out) {
  const char *name = "conv";
  common::Window cw;
  SMP_RETURN_IF_ERROR(common::checkConv(in, weight, bias, strides, pads,
                                        dilations, group, out, kMaxRank, cw));
  Win w = toWin(cw);
  int64_t channels = in.shape[1], outChannels = weight.shape[0];
  int64_t n = out.numel();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return launch(name, n, convKernel<S>, in.as<S>(), weight.as<S>(),
                  asIn(bias), out.as<S>(), w, channels, outChannels, group, n);
  });
}

Status pool(bool isMax, const TensorRef &in, const std::vector<int64_t> &kernel,
            const std::vector<int64_t> &strides,
            const std::vector<int64_t> &pads,
            const std::vector<int64_t> &dilations, bool ceilMode,
            bool countIncludePad, const TensorRef &out) {
  const char *name = isMax ? "max_pool" : "avg_pool";
  common::Window cw;
  SMP_RETURN_IF_ERROR(common::checkPool(
      name, in, kernel, strides, pads, dilations, ceilMode, out, kMaxRank, cw));
  Win w = toWin(cw);
  int64_t n = out.numel();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return launch(name, n, poolKernel<S>, in.as<S>(), out.as<S>(), w, isMax,
                  countIncludePad, n);
  });
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

namespace {

/// dx[b, c, i] = sum over the group's output channels oc and taps k of
/// dy[b, oc, o(i, k)] * w[oc, c % cg, k].
__global__ void convGradInput(In dy, In wt, Out dx, Win w, int64_t channels,
                              int64_t outChannels, int64_t group, int64_t n) {
  int64_t cg = channels / group, mg = outChannels / group;
  SMP_GRID_STRIDE(t, n) {
    int64_t i = t % w.inSize, plane = t / w.inSize;
    int64_t c = plane % channels, b = plane / channels;
    int64_t g = c / cg, ic = c % cg;
    double acc = 0;
    w.forEachWindowOf(i, [&](int64_t k, int64_t o) {
      for (int64_t oc = g * mg; oc < (g + 1) * mg; ++oc)
        acc += dy.load((b * outChannels + oc) * w.outSize + o) *
               wt.load((oc * cg + ic) * w.kernelSize + k);
    });
    dx.store(t, acc);
  }
}

/// dw[oc, ic, k] = sum over the batch and output positions o of
/// dy[b, oc, o] * x[b, g * cg + ic, tap(o, k)].
__global__ void convGradWeight(In x, In dy, Out dw, Win w, int64_t channels,
                               int64_t outChannels, int64_t group,
                               int64_t batch, int64_t n) {
  int64_t cg = channels / group, mg = outChannels / group;
  SMP_GRID_STRIDE(t, n) {
    int64_t k = t % w.kernelSize, rest = t / w.kernelSize;
    int64_t ic = rest % cg, oc = rest / cg, g = oc / mg;
    double acc = 0;
    for (int64_t o = 0; o < w.outSize; ++o) {
      int64_t oo[kMaxRank];
      w.unravel(o, w.out, oo);
      bool padded;
      int64_t i = w.tap(oo, k, padded);
      if (i < 0)
        continue;
      for (int64_t b = 0; b < batch; ++b)
        acc += dy.load((b * outChannels + oc) * w.outSize + o) *
               x.load((b * channels + g * cg + ic) * w.inSize + i);
    }
    dw.store(t, acc);
  }
}

/// dx[p, i] = sum over the windows o holding i: max: dy[p, o] when i is the
/// window's first maximum; average: dy[p, o] / divisor(o).
__global__ void poolGradKernel(In x, In dy, Out dx, Win w, bool isMax,
                               bool countIncludePad, int64_t n) {
  SMP_GRID_STRIDE(t, n) {
    int64_t i = t % w.inSize, plane = t / w.inSize;
    double acc = 0;
    w.forEachWindowOf(i, [&](int64_t, int64_t o) {
      int64_t oo[kMaxRank];
      w.unravel(o, w.out, oo);
      double g = dy.load(plane * w.outSize + o);
      if (isMax) {
        int64_t best = -1;
        double bestV = 0;
        for (int64_t q = 0; q < w.kernelSize; ++q) {
          bool padded;
          int64_t j = w.tap(oo, q, padded);
          if (j < 0)
            continue;
          double v = x.load(plane * w.inSize + j);
          if (best < 0 || v > bestV) {
            best = j;
            bestV = v;
          }
        }
        if (best == i)
          acc += g;
      } else {
        int64_t divisor = 0;
        for (int64_t q = 0; q < w.kernelSize; ++q) {
          bool padded;
          int64_t j = w.tap(oo, q, padded);
          divisor += countIncludePad ? (padded ? 1 : 0) : (j >= 0 ? 1 : 0);
        }
        if (divisor > 0)
          acc += g / static_cast<double>(divisor);
      }
    });
    dx.store(t, acc);
  }
}

} // namespace

Status convGrad(const TensorRef &x, const TensorRef &weight,
                const TensorRef &dy, const std::vector<int64_t> &strides,
                const std::vector<int64_t> &pads,
                const std::vector<int64_t> &dilations, int64_t group,
                const TensorRef &dx, const TensorRef &dweight) {
  const char *op = "conv_grad";
  common::Window cw;
  SMP_RETURN_IF_ERROR(common::checkConvGrad(x, weight, dy, strides, pads,
                                            dilations, group, dx, dweight,
                                            kMaxRank, cw));
  Win w = toWin(cw);
  int64_t batch = x.shape[0], c = x.shape[1], m = weight.shape[0];
  SMP_RETURN_IF_ERROR(launch(op, x.numel(), convGradInput, asIn(dy),
                             asIn(weight), asOut(dx), w, c, m, group,
                             x.numel()));
  return launch(op, weight.numel(), convGradWeight, asIn(x), asIn(dy),
                asOut(dweight), w, c, m, group, batch, weight.numel());
}

Status poolGrad(bool max, const TensorRef &x, const TensorRef &dy,
                const std::vector<int64_t> &kernel,
                const std::vector<int64_t> &strides,
                const std::vector<int64_t> &pads,
                const std::vector<int64_t> &dilations, bool countIncludePad,
                const TensorRef &dx) {
  const char *op = "pool_grad";
  common::Window cw;
  SMP_RETURN_IF_ERROR(common::checkPoolGrad(x, dy, kernel, strides, pads,
                                            dilations, dx, kMaxRank, cw));
  Win w = toWin(cw);
  return launch(op, x.numel(), poolGradKernel, asIn(x), asIn(dy), asOut(dx), w,
                max, countIncludePad, x.numel());
}

} // namespace smp::kernels::cuda
