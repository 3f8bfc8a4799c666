//===- TestUtil.h - Host tensors and naive references for kernel tests ----===//

#ifndef SMP_TEST_UNIT_KERNELS_TESTUTIL_H
#define SMP_TEST_UNIT_KERNELS_TESTUTIL_H

#include "smp/kernels/cpu/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace smp::kernels::cpu::test {

using smp::base::DType;
using smp::base::TensorRef;

/// A tensor that owns its bytes.
struct Host {
  std::vector<uint8_t> bytes;
  TensorRef ref;

  Host() = default;
  Host(DType t, std::vector<int64_t> shape) {
    ref.dtype = t;
    ref.shape = std::move(shape);
    bytes.assign(ref.bytes() + 8, 0);
    ref.data = bytes.data();
  }
  Host(const Host &o) : bytes(o.bytes), ref(o.ref) { ref.data = bytes.data(); }
  Host &operator=(const Host &o) {
    bytes = o.bytes;
    ref = o.ref;
    ref.data = bytes.data();
    return *this;
  }
  operator const TensorRef &() const { return ref; }
  int64_t numel() const { return ref.numel(); }

  /// Element i as double (any dtype).
  double get(int64_t i) const { return smp::base::elementAsDouble(ref, i); }
  /// Sets element i from a double (rounded for half types, C conversion for
  /// integers; callers pass representable values).
  void set(int64_t i, double v) { smp::base::setElementFromDouble(ref, i, v); }

  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i)
      v[i] = get(i);
    return v;
  }
  template <class T> T *as() { return static_cast<T *>(ref.data); }
};

/// The dims before `axis` (negative: from the end), at it, and after it,
/// each as one count: a tensor viewed as [outer, n, inner].
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisSplit splitAtAxis(const std::vector<int64_t> &s, int64_t axis) {
  int64_t a = axis < 0 ? axis + static_cast<int64_t>(s.size()) : axis;
  AxisSplit r;
  r.n = s[a];
  for (int64_t d = 0; d < a; ++d)
    r.outer *= s[d];
  for (size_t d = a + 1; d < s.size(); ++d)
    r.inner *= s[d];
  return r;
}

/// The layer/RMS norm cases both backends' tests run: x's shape, the
/// normalized axis, scale's and bias's shapes (empty: none).
struct NormCase {
  std::vector<int64_t> x;
  int64_t axis;
  std::vector<int64_t> scale, bias;
};
inline std::vector<NormCase> normCases() {
  return {
      {{4, 16}, 1, {16}, {16}},    {{2, 3, 8}, -1, {8}, {}},
      {{2, 3, 8}, 1, {3, 8}, {8}}, {{2, 3, 8}, 1, {3, 1}, {1}},
      {{5, 7}, 0, {5, 7}, {7}},    {{200, 96}, 1, {96}, {96}},
  };
}

inline Host make(DType t, std::vector<int64_t> shape,
                 const std::vector<double> &values = {}) {
  Host h(t, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i)
    h.set(static_cast<int64_t>(i), values[i]);
  return h;
}

/// Uniform random values in [lo, hi) (integers: rounded down).
inline Host random(DType t, std::vector<int64_t> shape, double lo, double hi,
                   unsigned seed) {
  Host h(t, std::move(shape));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < h.numel(); ++i) {
    double v = dist(gen);
    h.set(i, smp::base::isFloat(t) ? v : std::floor(v));
  }
  return h;
}

inline std::vector<int64_t> unravel(int64_t k,
                                    const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = k % shape[d];
    k /= shape[d];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t> &idx,
                     const std::vector<int64_t> &shape) {
  int64_t k = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    k = k * shape[d] + idx[d];
  return k;
}

/// Flat index into `in` (right-aligned, size-1 dims broadcast) of output
/// multi-index idx.
inline int64_t broadcastIndex(const std::vector<int64_t> &idx,
                              const std::vector<int64_t> &in) {
  size_t lead = idx.size() - in.size();
  int64_t k = 0;
  for (size_t d = 0; d < in.size(); ++d)
    k = k * in[d] + (in[d] == 1 ? 0 : idx[lead + d]);
  return k;
}

/// |a - b| <= atol + rtol * |b|, NaN == NaN.
inline void expectNear(const std::vector<double> &got,
                       const std::vector<double> &want, double rtol,
                       double atol = 0) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i]))
      continue;
    if (std::isinf(want[i]) && got[i] == want[i])
      continue;
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want "
                    << want[i];
      ++bad;
    }
  }
}

#define EXPECT_OK(expr)                                                        \
  do {                                                                         \
    ::smp::base::Status _s = (expr);                                           \
    EXPECT_TRUE(_s.ok()) << _s.error;                                          \
  } while (0)
#define ASSERT_OK(expr)                                                        \
  do {                                                                         \
    ::smp::base::Status _s = (expr);                                           \
    ASSERT_TRUE(_s.ok()) << _s.error;                                          \
  } while (0)

/// Tolerance for results stored in dtype t.
inline double tolFor(DType t) {
  switch (t) {
  case DType::F64:
    return 1e-12;
  case DType::F32:
    return 2e-6;
  case DType::F16:
    return 2e-3;
  case DType::BF16:
    return 1.6e-2;
  default:
    return 0;
  }
}

} // namespace smp::kernels::cpu::test

#endif // SMP_TEST_UNIT_KERNELS_TESTUTIL_H
