//===- Common.cpp - Threads and shared helpers of the CPU kernels ---------===//

#include "Common.h"
#include "smp/kernels/common/Elements.h"

#include <cblas.h>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace smp::kernels::cpu {

void setNumThreads(int n) {
  n = std::max(n, 1);
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
#ifdef SMP_HAVE_OPENBLAS
  // The GEMMs run on the OpenMP threads (Gemm.cpp); a second pool of
  // spinning OpenBLAS workers would only compete with them.
  openblas_set_num_threads(1);
#endif
}

int numThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

namespace detail {

void streamCopy(void *dst, const void *src, size_t n) {
#if defined(__x86_64__) // SSE2 is baseline there
  auto *d = static_cast<char *>(dst);
  const auto *s = static_cast<const char *>(src);
  size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
  if (head >= n) {
    std::memcpy(d, s, n);
    return;
  }
  std::memcpy(d, s, head);
  size_t i = head;
  for (; i + 16 <= n; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i *>(d + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i *>(s + i)));
  std::memcpy(d + i, s + i, n - i);
#else
  std::memcpy(dst, src, n);
#endif
}

void streamFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

int64_t loadInt(const TensorRef &t, int64_t i) {
  return common::loadIndex(t.data, t.dtype, i);
}

Status loadLabels(const char *op, const TensorRef &labels, int64_t classes,
                  int64_t ignoreIndex, std::vector<int64_t> &out) {
  int64_t rows = labels.numel();
  out.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    bool huge =
        labels.dtype == DType::U64 &&
        static_cast<const uint64_t *>(labels.data)[r] > uint64_t(INT64_MAX);
    int64_t v = huge ? -1 : loadInt(labels, r);
    out[r] = v;
    if (!huge && v == ignoreIndex)
      continue;
    if (huge || v < 0 || v >= classes)
      return fail(op, "label " +
                          (huge ? std::to_string(static_cast<const uint64_t *>(
                                      labels.data)[r])
                                : std::to_string(v)) +
                          " at position " + std::to_string(r) +
                          " is outside [0, " + std::to_string(classes) +
                          ") and is not the ignore_index " +
                          std::to_string(ignoreIndex));
  }
  return Status::success();
}

Status loadDoubles(const TensorRef &t, int64_t begin, int64_t n, double *dst) {
  return visitFloat(t.dtype, "toDouble", [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S *p = t.as<S>() + begin;
    for (int64_t i = 0; i < n; ++i)
      dst[i] = static_cast<double>(Float<S>::load(p[i]));
    return Status::success();
  });
}

Status storeDoubles(const char *op, const TensorRef &t, int64_t begin,
                    int64_t n, const double *src) {
  return visitFloat(t.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename Float<S>::C;
    S *o = t.as<S>() + begin;
    for (int64_t i = 0; i < n; ++i)
      o[i] = Float<S>::store(static_cast<C>(src[i]));
    return Status::success();
  });
}

std::vector<double> toDouble(const TensorRef &t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  (void)loadDoubles(t, 0, t.numel(), v.data());
  return v;
}

Status storeDouble(const char *op, const TensorRef &out,
                   const std::vector<double> &values) {
  return storeDoubles(op, out, 0, static_cast<int64_t>(values.size()),
                      values.data());
}

namespace {
template <class T>
void copyRuns(const StridedLoop<1> &loop, const T *in, T *out, int64_t total) {
  loop.parallelRuns(total, grainFor(1),
                    [&](int64_t pos, const std::array<int64_t, 1> &off,
                        int64_t len, const std::array<int64_t, 1> &inner) {
                      const T *src = in + off[0];
                      T *dst = out + pos;
                      if (inner[0] == 1) {
                        std::memcpy(dst, src, len * sizeof(T));
                      } else if (inner[0] == 0) {
                        std::fill(dst, dst + len, *src);
                      } else {
                        for (int64_t i = 0; i < len; ++i)
                          dst[i] = src[i * inner[0]];
                      }
                    });
}
} // namespace

/// A transpose-like copy: the innermost output dim reads with a large
/// stride while dim `j` reads contiguously. Copies 32x32 tiles of (j, last)
/// so that both sides stay in cache.
template <class T>
void copyTiled(const StridedLoop<1> &loop, size_t j, const T *in, T *out) {
  constexpr int64_t kTile = 32;
  const std::vector<int64_t> &shape = loop.shape, &str = loop.strides[0];
  size_t r = shape.size(), last = r - 1;
  std::vector<int64_t> outStr = contiguousStrides(shape);
  std::vector<int64_t> outerDims;
  for (size_t d = 0; d < last; ++d)
    if (d != j)
      outerDims.push_back(static_cast<int64_t>(d));
  int64_t outer = 1;
  for (int64_t d : outerDims)
    outer *= shape[d];
  int64_t tj = (shape[j] + kTile - 1) / kTile,
          tl = (shape[last] + kTile - 1) / kTile;
  parallelFor(outer * tj * tl, grainFor(kTile * kTile),
              [&](int64_t b, int64_t e) {
                for (int64_t t = b; t < e; ++t) {
                  int64_t rest = t / (tj * tl), tile = t % (tj * tl);
                  int64_t j0 = (tile / tl) * kTile, l0 = (tile % tl) * kTile;
                  int64_t inOff = 0, outOff = 0;
                  for (size_t k = outerDims.size(); k-- > 0;) {
                    int64_t d = outerDims[k], i = rest % shape[d];
                    rest /= shape[d];
                    inOff += i * str[d];
                    outOff += i * outStr[d];
                  }
                  int64_t j1 = std::min(j0 + kTile, shape[j]);
                  int64_t l1 = std::min(l0 + kTile, shape[last]);
                  for (int64_t a = j0; a < j1; ++a) {
                    const T *src = in + inOff + a * str[j];
                    T *dst = out + outOff + a * outStr[j];
                    for (int64_t l = l0; l < l1; ++l)
                      dst[l] = src[l * str[last]];
                  }
                }
              });
}

Status stridedCopy(const char *op, const TensorRef &in, int64_t base,
                   const std::vector<int64_t> &strides, const TensorRef &out) {
  int64_t total = out.numel();
  if (total == 0)
    return Status::success();
  StridedLoop<1> loop(out.shape, {strides});
  const std::vector<int64_t> &str = loop.strides[0];
  size_t r = loop.shape.size(), tiledDim = r;
  if (r >= 2 && str[r - 1] != 0 && str[r - 1] != 1 && loop.shape[r - 1] >= 8)
    for (size_t d = 0; d + 1 < r; ++d)
      if (str[d] == 1 && loop.shape[d] >= 8)
        tiledDim = d;
  return visitBytes(out.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (tiledDim < r)
      copyTiled<T>(loop, tiledDim, in.as<T>() + base, out.as<T>());
    else
      copyRuns<T>(loop, in.as<T>() + base, out.as<T>(), total);
    return Status::success();
  });
}

} // namespace detail
} // namespace smp::kernels::cpu
