//===- CheckedMath.h - Overflow-checked sizes and the size limits -*- C++ -*-===//
//
// Every size, offset and element count that smpc computes from a model
// (shape inference, converters, VJPs, the artifact writer) goes through
// these helpers: an overflow gives std::nullopt, which the caller turns into
// a one-line error naming the node and the shape, never a wrapped value.
// The limits are documented in docs/threat-model.md ("Sizes and limits").
//
//===----------------------------------------------------------------------===//

#ifndef SMP_SUPPORT_CHECKEDMATH_H
#define SMP_SUPPORT_CHECKEDMATH_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cstdint>
#include <optional>

namespace smp {

/// The most bytes one tensor may have anywhere in a model (at import: graph
/// inputs, initializers, every value a node computes). 256 TiB: far above
/// any real tensor, far below where byte counts overflow.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;

/// The most bytes of one constant the compiler makes (a fold, a
/// ConstantOfShape) and writes into the weights file. Larger ones stay ops
/// (an expand of one value) computed at run time.
constexpr int64_t kMaxConstantBytes = int64_t(1) << 30;

/// The most bytes all constants of one rank's program may take in its
/// weights file together (4 GiB).
constexpr int64_t kMaxConstantBytesPerRank = int64_t(1) << 32;

/// The most bytes of one rank's arena (its device memory plan), host arena
/// or weights file, refused by the artifact writer (1 TiB).
constexpr int64_t kMaxArenaBytes = int64_t(1) << 40;

inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  return llvm::checkedAdd(a, b);
}
inline std::optional<int64_t> checkedSub(int64_t a, int64_t b) {
  return llvm::checkedSub(a, b);
}
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  return llvm::checkedMul(a, b);
}

/// Number of elements of `shape`; nullopt for a negative dim or when the
/// product of the non-zero dims passes 2^62 (so that the product of any
/// subset of the dims, a flattened row for instance, cannot overflow either,
/// even when another dim is 0).
inline std::optional<int64_t> checkedElementCount(llvm::ArrayRef<int64_t> shape) {
  constexpr int64_t kLimit = int64_t(1) << 62;
  int64_t nonZero = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d == 0) {
      empty = true;
      continue;
    }
    if (nonZero > kLimit / d)
      return std::nullopt;
    nonZero *= d;
  }
  return empty ? 0 : nonZero;
}

/// Bytes of a tensor of `shape` whose elements take `elementBits` bits (i1
/// is stored in a byte); nullopt on overflow.
inline std::optional<int64_t> checkedByteSize(llvm::ArrayRef<int64_t> shape,
                                              unsigned elementBits) {
  auto n = checkedElementCount(shape);
  if (!n)
    return std::nullopt;
  return checkedMul(*n, int64_t((elementBits + 7) / 8));
}

} // namespace smp

#endif // SMP_SUPPORT_CHECKEDMATH_H
