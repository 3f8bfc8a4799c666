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

} // namespace smp::base

#endif // SMP_BASE_SHAPE_H
