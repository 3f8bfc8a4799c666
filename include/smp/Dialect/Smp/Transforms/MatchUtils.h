//===- MatchUtils.h - Helpers for smp raising patterns ----------*- C++ -*-===//

#ifndef SMP_DIALECT_SMP_TRANSFORMS_MATCHUTILS_H
#define SMP_DIALECT_SMP_TRANSFORMS_MATCHUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace smp {

/// True if `v` is a constant whose every element equals `expected` within a
/// relative tolerance of 1e-4.
bool isSplatConstant(mlir::Value v, double expected);

/// The splat value of a constant `v`, if it is one.
std::optional<double> getSplatConstant(mlir::Value v);

/// Flattens a tree of single-use `smp.mul` ops rooted at `root` into its
/// factors (the root itself may have many uses).
llvm::SmallVector<mlir::Value> collectMulFactors(mlir::Value root);

/// The shape of a ranked tensor value.
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return mlir::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

/// The two ops carry the same annotations (stage, micro-batch, recompute
/// and backward marks): fusing them moves none across a boundary.
inline bool sameAnnotations(mlir::Operation *a, mlir::Operation *b) {
  return a->getDiscardableAttrDictionary() == b->getDiscardableAttrDictionary();
}

/// True when `axes` (negative from the end) are exactly [0, rank - 1): a
/// sum over every dim but the last (a bias gradient).
bool reducesLeadingDims(llvm::ArrayRef<int64_t> axes, int64_t rank);

} // namespace smp

#endif // SMP_DIALECT_SMP_TRANSFORMS_MATCHUTILS_H
