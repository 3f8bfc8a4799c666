//===- ShapeUtils.h - Shape helpers shared by ops and frontends -*- C++ -*-===//
//
// Pure shape arithmetic (no IR): broadcasting, axis normalisation, the output
// size of convolutions and pools. Used by the ops' type inference and by the
// ONNX frontend's constant folder, so both agree by construction.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SHAPEUTILS_H
#define SMP_DIALECT_SMP_IR_SHAPEUTILS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <optional>
#include <string>

namespace smp {

/// Numpy broadcast of two shapes; std::nullopt when incompatible.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Normalises a possibly negative axis into [0, rank); nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Product of dims; nullopt on a negative dim or when the product of the
/// non-zero dims passes 2^62 (smp/Support/CheckedMath.h).
std::optional<int64_t> checkedNumElements(llvm::ArrayRef<int64_t> shape);

/// Output length of a sliding window (conv / pool) along one dim; nullopt if
/// the window does not fit or a size overflows.
std::optional<int64_t> windowOutputSize(int64_t in, int64_t kernel,
                                        int64_t stride, int64_t padBegin,
                                        int64_t padEnd, int64_t dilation,
                                        bool ceilMode);

/// Number of elements of a strided slice [start, limit) with step.
int64_t sliceLength(int64_t start, int64_t limit, int64_t step);

/// Whether `shape` is [n] or [1, ..., 1, n] of at most `maxRank` dims: a
/// vector along the last dim that broadcasts onto a rank-`maxRank` shape
/// without growing it (a bias added to every row).
bool isRowVector(llvm::ArrayRef<int64_t> shape, int64_t n, int64_t maxRank);

/// "2x3x4" for diagnostics.
std::string shapeToString(llvm::ArrayRef<int64_t> shape);

} // namespace smp

#endif // SMP_DIALECT_SMP_IR_SHAPEUTILS_H
