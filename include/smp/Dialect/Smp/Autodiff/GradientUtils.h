//===- GradientUtils.h - Helpers for building gradients ---------*- C++ -*-===//
//
// The ops gradients are made of, used by the autodiff driver and by the
// gradients of the op models (lib/Dialect/Smp/OpModels).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_AUTODIFF_GRADIENTUTILS_H
#define SMP_DIALECT_SMP_AUTODIFF_GRADIENTUTILS_H

#include "mlir/IR/Builders.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Interfaces/AutodiffInterface.h"

namespace smp::autodiff {

using mlir::ArrayRef;
using mlir::LogicalResult;
using mlir::OpBuilder;
using mlir::SmallVectorImpl;
using mlir::Value;

mlir::RankedTensorType typeOf(Value v);

/// Builds the ops gradients are made of, at one location.
struct Grad {
  OpBuilder &b;
  mlir::Location loc;

  Value add(Value x, Value y);
  Value sub(Value x, Value y);
  Value mul(Value x, Value y);
  Value div(Value x, Value y);
  Value neg(Value x);
  /// A rank-0 constant of `like`'s element type.
  Value scalar(Value like, double v);
  /// Zeros of `type`.
  Value zeros(mlir::Type type);
  Value reshape(Value v, ArrayRef<int64_t> shape);
  /// Sums over `axes` (keepdims as given).
  Value sum(Value v, ArrayRef<int64_t> axes, bool keepdims);
  /// Reduces a broadcast gradient back to `target`'s shape: sums the
  /// leading dims and the dims `target` has as 1, then reshapes.
  Value unbroadcast(Value g, mlir::Type target);
  /// Reshapes a reduced gradient to keepdims form and broadcasts it over
  /// `target` (the backward of a reduction).
  Value expandTo(Value g, ArrayRef<int64_t> axes, mlir::Type target);
  Value where(Value cond, Value x, Value y);
  Value cast(Value v, mlir::Type elementType);
};

} // namespace smp::autodiff

#endif // SMP_DIALECT_SMP_AUTODIFF_GRADIENTUTILS_H
