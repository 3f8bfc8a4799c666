//===- GradientUtils.h - Helpers for the smp VJPs ---------------*- C++ -*-===//

#ifndef SMP_LIB_DIALECT_SMP_AUTODIFF_GRADIENTUTILS_H
#define SMP_LIB_DIALECT_SMP_AUTODIFF_GRADIENTUTILS_H

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

// One overload per differentiable op (VJP*.cpp). `need[i]` says whether
// operand i needs a gradient; `gx` has one (null-initialised) slot per
// operand.
#define SMP_DECLARE_VJP(OP)                                                    \
  LogicalResult vjp(OP op, OpBuilder &b, ArrayRef<Value> gy,                   \
                    ArrayRef<bool> need, SmallVectorImpl<Value> &gx);

// Elementwise (VJPElementwise.cpp)
SMP_DECLARE_VJP(AddOp)
SMP_DECLARE_VJP(SubOp)
SMP_DECLARE_VJP(MulOp)
SMP_DECLARE_VJP(DivOp)
SMP_DECLARE_VJP(PowOp)
SMP_DECLARE_VJP(MaxOp)
SMP_DECLARE_VJP(MinOp)
SMP_DECLARE_VJP(NegOp)
SMP_DECLARE_VJP(AbsOp)
SMP_DECLARE_VJP(ExpOp)
SMP_DECLARE_VJP(LogOp)
SMP_DECLARE_VJP(SqrtOp)
SMP_DECLARE_VJP(RsqrtOp)
SMP_DECLARE_VJP(ReciprocalOp)
SMP_DECLARE_VJP(TanhOp)
SMP_DECLARE_VJP(ErfOp)
SMP_DECLARE_VJP(SigmoidOp)
SMP_DECLARE_VJP(SiluOp)
SMP_DECLARE_VJP(ReluOp)
SMP_DECLARE_VJP(SinOp)
SMP_DECLARE_VJP(CosOp)
SMP_DECLARE_VJP(LeakyReluOp)
SMP_DECLARE_VJP(GeluOp)
SMP_DECLARE_VJP(CastOp)
SMP_DECLARE_VJP(WhereOp)
SMP_DECLARE_VJP(ModOp)
// Linear algebra, reductions, normalisation, losses (VJPLinalg.cpp)
SMP_DECLARE_VJP(MatMulOp)
SMP_DECLARE_VJP(ReduceSumOp)
SMP_DECLARE_VJP(ReduceMeanOp)
SMP_DECLARE_VJP(ReduceMaxOp)
SMP_DECLARE_VJP(SoftmaxOp)
SMP_DECLARE_VJP(LogSoftmaxOp)
SMP_DECLARE_VJP(CumSumOp)
SMP_DECLARE_VJP(LayerNormOp)
SMP_DECLARE_VJP(RmsNormOp)
SMP_DECLARE_VJP(BatchNormOp)
SMP_DECLARE_VJP(CrossEntropyOp)
SMP_DECLARE_VJP(ConvOp)
SMP_DECLARE_VJP(MaxPoolOp)
SMP_DECLARE_VJP(AvgPoolOp)
// Data movement (VJPDataMovement.cpp)
SMP_DECLARE_VJP(ReshapeOp)
SMP_DECLARE_VJP(TransposeOp)
SMP_DECLARE_VJP(ExpandOp)
SMP_DECLARE_VJP(SliceOp)
SMP_DECLARE_VJP(ConcatOp)
SMP_DECLARE_VJP(SplitOp)
SMP_DECLARE_VJP(GatherOp)
SMP_DECLARE_VJP(GatherNdOp)
SMP_DECLARE_VJP(GatherElementsOp)
SMP_DECLARE_VJP(TriluOp)

#undef SMP_DECLARE_VJP

} // namespace smp::autodiff

#endif // SMP_LIB_DIALECT_SMP_AUTODIFF_GRADIENTUTILS_H
