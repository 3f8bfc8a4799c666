//===- ConvGrad.cpp - conv_grad, pool_grad --------------------------------===//
//
// Direct loops over output positions and kernel taps, in double. Fine for
// the model sizes the CPU backend trains; not yet the forward's im2col +
// GEMM.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

namespace smp::kernels::cpu {
using namespace detail;

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

} // namespace smp::kernels::cpu
