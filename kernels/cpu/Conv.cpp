//===- Conv.cpp - N-d grouped convolution, max pool, average pool ---------===//
//
// Convolution: im2col over chunks of output positions, then per (group,
// chunk) one batch of GEMMs over the images: out[Mg, P] = W[Mg, Cg*K] x
// col[Cg*K, P]. 1x1 convolutions with unit strides and no padding multiply
// the input directly.
// Pools walk each window's taps that fall inside the input.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

namespace smp::kernels::cpu {
using namespace detail;

namespace {

/// Spatial geometry of a sliding-window op (no limit on the spatial dims).
using common::Window;

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// nb products out[Mg, P] = W[Mg, K] x col[K, P] (see gemmBatch): product
/// i reads b + offB[i] and writes c + i * strideC.
template <class T>
void convGemms(int64_t m, int64_t n, int64_t k, const T *a, int64_t lda,
               const T *b, const std::vector<int64_t> &offB, int64_t ldb, T *c,
               int64_t strideC, int64_t ldc) {
  GemmShape g{false, false, m, n, k, lda, ldb, ldc};
  std::vector<int64_t> offA(offB.size(), 0);
  gemmBatch(g, a, offA.data(), b, offB.data(), c, strideC,
            static_cast<int64_t>(offB.size()));
}

/// col[r][p - p0] for rows r = (c, kernel tap) and output positions
/// p in [p0, p0 + len) of one image/group whose channels start at x.
template <class T>
void im2col(const Window &w, int64_t channels, const T *x, int64_t p0,
            int64_t len, T *col) {
  size_t n = w.dims;
  std::vector<int64_t> inStrides = contiguousStrides(w.in);
  int64_t rows = channels * w.kernelSize;
  // Rows in parallel: the GEMM that follows runs on the same OpenMP threads
  // (OpenBLAS itself is single-threaded, see Gemm.cpp).
  auto body = [&](int64_t rb, int64_t re) {
    std::vector<int64_t> kOff(n), idx(n);
    for (int64_t r = rb; r < re; ++r) {
      int64_t c = r / w.kernelSize, rem = r % w.kernelSize;
      for (size_t d = n; d-- > 0;) {
        kOff[d] = (rem % w.kernel[d]) * w.dilations[d] - w.padBegin[d];
        rem /= w.kernel[d];
      }
      const T *xc = x + c * w.inSize;
      T *dst = col + r * len;
      int64_t q = p0;
      for (size_t d = n; d-- > 0;) {
        idx[d] = q % w.out[d];
        q /= w.out[d];
      }
      int64_t last = n - 1;
      for (int64_t p = 0; p < len;) {
        int64_t run = std::min(w.out[last] - idx[last], len - p);
        bool valid = true;
        int64_t base = 0;
        for (int64_t d = 0; d < last; ++d) {
          int64_t coord = idx[d] * w.strides[d] + kOff[d];
          valid = valid && coord >= 0 && coord < w.in[d];
          base += coord * inStrides[d];
        }
        if (!valid) {
          std::fill_n(dst + p, run, T(0));
        } else {
          // Taps j in [lo, hi) of the run land inside the input row.
          const T *xr = xc + base;
          int64_t s = w.strides[last], lim = w.in[last];
          int64_t c0 = idx[last] * s + kOff[last];
          int64_t lo = c0 >= 0 ? 0 : (-c0 + s - 1) / s;
          int64_t hi = c0 >= lim ? 0 : (lim - c0 + s - 1) / s;
          lo = std::min(lo, run);
          hi = std::max(lo, std::min(hi, run));
          T *d = dst + p;
          std::fill(d, d + lo, T(0));
          if (s == 1)
            std::copy(xr + c0 + lo, xr + c0 + hi, d + lo);
          else
            for (int64_t j = lo; j < hi; ++j)
              d[j] = xr[c0 + j * s];
          std::fill(d + hi, d + run, T(0));
        }
        p += run;
        idx[last] += run;
        for (int64_t d = last; d > 0 && idx[d] == w.out[d]; --d) {
          idx[d] = 0;
          ++idx[d - 1];
        }
      }
    }
  };
  parallelFor(rows, grainFor(len), body);
}

template <class T>
void convImpl(const Window &w, const T *x, const T *wt,
              const std::vector<double> *bias, T *y, int64_t batch,
              int64_t inChannels, int64_t outChannels, int64_t group) {
  int64_t cg = inChannels / group, mg = outChannels / group;
  int64_t rows = cg * w.kernelSize, positions = w.outSize;
  bool pointwise = w.kernelSize == 1;
  for (size_t d = 0; d < w.dims; ++d)
    pointwise = pointwise && w.strides[d] == 1 && w.padBegin[d] == 0 &&
                w.padEnd[d] == 0;
  // Chunks of output positions keep one image's col under ~16 MiB. Small
  // images are taken together, col under ~8 MiB (it stays in cache between
  // im2col and the GEMMs), so that their GEMMs run as one batch (gemmBatch
  // shares them out over the threads). Neither depends on the thread count
  // (see Gemm.cpp).
  int64_t chunk = std::max<int64_t>(1, (int64_t(16) << 20) /
                                           static_cast<int64_t>(sizeof(T)) /
                                           std::max<int64_t>(rows, 1));
  chunk = std::min(chunk, positions);
  int64_t images =
      std::clamp<int64_t>((int64_t(8) << 20) / static_cast<int64_t>(sizeof(T)) /
                              std::max<int64_t>(rows * chunk, 1),
                          1, batch);
  std::vector<T> col(pointwise ? 0
                               : static_cast<size_t>(images * rows * chunk));
  std::vector<int64_t> offB;
  int64_t imageStride = outChannels * positions;
  for (int64_t n0 = 0; n0 < batch; n0 += images) {
    int64_t nImages = std::min(images, batch - n0);
    for (int64_t g = 0; g < group; ++g) {
      const T *wg = wt + g * mg * rows;
      T *yg = y + (n0 * outChannels + g * mg) * positions;
      if (pointwise) {
        offB.resize(nImages);
        for (int64_t i = 0; i < nImages; ++i)
          offB[i] = ((n0 + i) * inChannels + g * cg) * w.inSize;
        convGemms(mg, positions, cg, wg, cg, x, offB, positions, yg,
                  imageStride, positions);
        continue;
      }
      for (int64_t p0 = 0; p0 < positions; p0 += chunk) {
        int64_t len = std::min(chunk, positions - p0);
        offB.resize(nImages);
        for (int64_t i = 0; i < nImages; ++i) {
          const T *xg = x + ((n0 + i) * inChannels + g * cg) * w.inSize;
          offB[i] = i * rows * len;
          im2col(w, cg, xg, p0, len, col.data() + offB[i]);
        }
        convGemms(mg, len, rows, wg, rows, col.data(), offB, len, yg + p0,
                  imageStride, positions);
      }
    }
  }
  if (!bias)
    return;
  parallelFor(batch * outChannels, grainFor(positions),
              [&](int64_t b, int64_t e) {
                for (int64_t plane = b; plane < e; ++plane) {
                  T v = static_cast<T>((*bias)[plane % outChannels]);
                  T *yp = y + plane * positions;
                  for (int64_t i = 0; i < positions; ++i)
                    yp[i] += v;
                }
              });
}

} // namespace

Status conv(const TensorRef &in, const TensorRef &weight, const TensorRef *bias,
            const std::vector<int64_t> &strides,
            const std::vector<int64_t> &pads,
            const std::vector<int64_t> &dilations, int64_t group,
            const TensorRef &out) {
  const char *name = "conv";
  Window w;
  SMP_RETURN_IF_ERROR(common::checkConv(in, weight, bias, strides, pads,
                                        dilations, group, out, kAnyDims, w));
  int64_t channels = in.shape[1], outChannels = weight.shape[0];
  std::vector<double> b;
  if (bias)
    b = toDouble(*bias);
  if (out.numel() == 0)
    return Status::success();
  int64_t batch = in.shape[0];
  if (in.dtype == DType::F32) {
    convImpl(w, in.as<float>(), weight.as<float>(), bias ? &b : nullptr,
             out.as<float>(), batch, channels, outChannels, group);
    return Status::success();
  }
  if (in.dtype == DType::F64) {
    convImpl(w, in.as<double>(), weight.as<double>(), bias ? &b : nullptr,
             out.as<double>(), batch, channels, outChannels, group);
    return Status::success();
  }
  return visitFloat(in.dtype, name, [&](auto tag) { // f16 / bf16 via f32
    using S = typename decltype(tag)::type;
    auto widen = [](const TensorRef &t) {
      std::vector<float> v(static_cast<size_t>(t.numel()));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = Float<S>::load(t.as<S>()[i]);
      return v;
    };
    std::vector<float> x = widen(in), wt = widen(weight);
    std::vector<float> y(static_cast<size_t>(out.numel()));
    convImpl(w, x.data(), wt.data(), bias ? &b : nullptr, y.data(), batch,
             channels, outChannels, group);
    for (size_t i = 0; i < y.size(); ++i)
      out.as<S>()[i] = Float<S>::store(y[i]);
    return Status::success();
  });
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

namespace {

template <class S>
void poolImpl(const Window &w, const S *x, S *y, int64_t planes, bool isMax,
              bool countIncludePad) {
  using C = typename Float<S>::C;
  size_t n = w.dims;
  std::vector<int64_t> inStrides = contiguousStrides(w.in);
  parallelFor(
      planes, grainFor(w.outSize * w.kernelSize), [&](int64_t pb, int64_t pe) {
        // Per dim: offsets of the taps inside the input, and the divisor
        // counts.
        std::vector<std::vector<int64_t>> taps(n);
        std::vector<int64_t> idx(n), tapIdx(n);
        for (int64_t plane = pb; plane < pe; ++plane) {
          const S *xp = x + plane * w.inSize;
          S *yp = y + plane * w.outSize;
          std::fill(idx.begin(), idx.end(), 0);
          for (int64_t p = 0; p < w.outSize; ++p) {
            int64_t inside = 1, padded = 1;
            for (size_t d = 0; d < n; ++d) {
              taps[d].clear();
              int64_t start = idx[d] * w.strides[d] - w.padBegin[d], cnt = 0;
              for (int64_t k = 0; k < w.kernel[d]; ++k) {
                int64_t c = start + k * w.dilations[d];
                if (c >= 0 && c < w.in[d])
                  taps[d].push_back(c * inStrides[d]);
                if (c >= -w.padBegin[d] && c < w.in[d] + w.padEnd[d])
                  ++cnt;
              }
              inside *= static_cast<int64_t>(taps[d].size());
              padded *= cnt;
            }
            C best = -std::numeric_limits<C>::infinity();
            double sum = 0;
            if (inside > 0) {
              std::fill(tapIdx.begin(), tapIdx.end(), 0);
              while (true) {
                int64_t off = 0;
                for (size_t d = 0; d < n; ++d)
                  off += taps[d][tapIdx[d]];
                C v = Float<S>::load(xp[off]);
                if (isMax) {
                  if (v > best || std::isnan(v))
                    best = v;
                } else {
                  sum += static_cast<double>(v);
                }
                size_t d = n;
                while (d > 0 && ++tapIdx[d - 1] ==
                                    static_cast<int64_t>(taps[d - 1].size())) {
                  tapIdx[d - 1] = 0;
                  --d;
                }
                if (d == 0)
                  break;
              }
            }
            if (isMax)
              yp[p] = Float<S>::store(best);
            else
              yp[p] = Float<S>::store(static_cast<C>(
                  sum /
                  static_cast<double>(countIncludePad ? padded : inside)));
            for (size_t d = n; d-- > 0;) {
              if (++idx[d] < w.out[d])
                break;
              idx[d] = 0;
            }
          }
        }
      });
}

} // namespace

Status pool(bool isMax, const TensorRef &in, const std::vector<int64_t> &kernel,
            const std::vector<int64_t> &strides,
            const std::vector<int64_t> &pads,
            const std::vector<int64_t> &dilations, bool ceilMode,
            bool countIncludePad, const TensorRef &out) {
  const char *name = isMax ? "max_pool" : "avg_pool";
  Window w;
  SMP_RETURN_IF_ERROR(common::checkPool(name, in, kernel, strides, pads,
                                        dilations, ceilMode, out, kAnyDims, w));
  if (out.numel() == 0)
    return Status::success();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    poolImpl(w, in.as<S>(), out.as<S>(), in.shape[0] * in.shape[1], isMax,
             countIncludePad);
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
