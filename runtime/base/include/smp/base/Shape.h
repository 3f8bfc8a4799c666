//===- Shape.h - Strides and overflow-checked sizes -------------*- C++ -*-===//
//
// Part of smp_base. Every element count the runtime computes from a file
// (an artifact, a checkpoint, a .npy header) goes through these helpers: a
// crafted shape gives `false`, which the caller turns into an error naming
// the file, never a wrapped value (docs/threat-model.md, "Sizes and
// limits"). The compiler has its own LLVM-based ones
// (include/smp/Support/CheckedMath.h).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_SHAPE_H
#define SMP_BASE_SHAPE_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace smp::base {

/// Row-major element strides of `shape`.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape);

/// out = a * b, false (out unspecified) when it overflows int64.
inline bool checkedMul(int64_t a, int64_t b, int64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}

/// The element count of `shape` (any container of integer dims), false
/// when a dim is negative or a running product of the dims exceeds `limit`
/// (checked: never wraps for any limit).
template <typename Dims>
bool checkedElementCount(const Dims &shape, uint64_t limit, uint64_t &n) {
  n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (d > 0 && n > limit / static_cast<uint64_t>(d))
      return false;
    n *= static_cast<uint64_t>(d);
  }
  return n <= limit;
}

/// Numpy broadcast of the dims of `a` and `b` (right-aligned) into `out`
/// (any containers of int64 dims; `out` is resized); false when a pair of
/// dims is neither equal nor 1. The compiler's shape inference and the
/// kernels' checks both use it.
template <typename A, typename B, typename Out>
bool broadcastShapes(const A &a, const B &b, Out &out) {
  size_t rank = std::max(a.size(), b.size());
  out.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      return false;
  }
  return true;
}

} // namespace smp::base

#endif // SMP_BASE_SHAPE_H
