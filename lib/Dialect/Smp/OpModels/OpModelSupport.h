//===- OpModelSupport.h - Building blocks of the op models ------*- C++ -*-===//
//
// Shared by the op-model files: attaching a model to a list of ops, the
// gradient model that calls a family's `vjp` overload, cost helpers and
// sharding-rule helpers.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_DIALECT_SMP_OPMODELS_OPMODELSUPPORT_H
#define SMP_LIB_DIALECT_SMP_OPMODELS_OPMODELSUPPORT_H

#include "mlir/IR/DialectRegistry.h"
#include "smp/Analysis/Cost/OpCosts.h"
#include "smp/Dialect/Smp/Autodiff/GradientUtils.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/OpModels/OpModels.h"
#include "smp/Interfaces/AutodiffInterface.h"
#include "smp/Interfaces/CostInterface.h"
#include "smp/Interfaces/TensorParallelInterface.h"

namespace smp {

/// Attaches `Model<Op>` to every op of `Ops`.
template <template <typename> class Model, typename... Ops>
void attach(mlir::MLIRContext *ctx) {
  (Ops::template attachInterface<Model<Ops>>(*ctx), ...);
}

//===--- Gradients --------------------------------------------------------===//

/// The gradient of a differentiable op: defined in its family's file as
/// `SMP_VJP(OpT) { ... }`, an overload of `smp::vjp` (found by
/// argument-dependent lookup). `need[i]` says whether operand i needs a
/// gradient; `gx` has one null-initialised slot per operand.
#define SMP_VJP(OP)                                                            \
  [[maybe_unused]] static ::llvm::LogicalResult vjp(                           \
      OP op, ::mlir::OpBuilder &b, ::llvm::ArrayRef<::mlir::Value> gy,         \
      ::llvm::ArrayRef<bool> need,                                             \
      ::llvm::SmallVectorImpl<::mlir::Value> &gx)

template <typename OpT>
struct GradientModel
    : public AutodiffOpInterface::ExternalModel<GradientModel<OpT>, OpT> {
  llvm::LogicalResult buildVJP(mlir::Operation *op, mlir::OpBuilder &b,
                               llvm::ArrayRef<mlir::Value> gy,
                               llvm::ArrayRef<bool> need,
                               llvm::SmallVectorImpl<mlir::Value> &gx) const {
    gx.assign(op->getNumOperands(), mlir::Value());
    return vjp(llvm::cast<OpT>(op), b, gy, need, gx);
  }
};

//===--- Costs ------------------------------------------------------------===//
//
// FLOPs count a multiply-add as two. Bytes are the operands read and the
// results written once each, except where an op touches less (a gather
// reads the rows it returns, a reshape is free) or more (a gather's
// gradient writes the whole table). Transcendental functions count as a few
// FLOPs each; on a GPU these ops are bandwidth-bound anyway.

/// Elements of a statically shaped tensor value (0 otherwise).
double numel(mlir::Value v);

/// Operands read and results written once each; `perElement` FLOPs per
/// result element.
OpCost streaming(mlir::Operation *op, double perElement);

/// `CostFn<Fn>::Model` computes an op's cost with `Fn`.
template <OpCost (*Fn)(mlir::Operation *)> struct CostFn {
  template <typename OpT>
  struct Model : public CostOpInterface::ExternalModel<Model<OpT>, OpT> {
    OpCost getCost(mlir::Operation *op) const { return Fn(op); }
  };
};

template <int PerElement> OpCost streamingCost(mlir::Operation *op) {
  return streaming(op, PerElement);
}
/// Free: a view, a constant, or work the communication model times.
inline OpCost noCost(mlir::Operation *) { return OpCost(); }

/// Streams its operands and results with `PerElement` FLOPs per result
/// element.
template <typename OpT>
using Streaming0 = typename CostFn<streamingCost<0>>::template Model<OpT>;
template <typename OpT>
using Streaming1 = typename CostFn<streamingCost<1>>::template Model<OpT>;
template <typename OpT>
using NoCost = typename CostFn<noCost>::template Model<OpT>;

//===--- Sharding rules ---------------------------------------------------===//

/// `axis` (negative counts from the end) as an index into `rank` dims.
inline int64_t axisIndex(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType()).getShape();
}

/// Base of a sharding rule for OpT.
template <typename Rule, typename OpT>
using TpRule = TensorParallelOpInterface::ExternalModel<Rule, OpT>;

/// An op whose result is its only operand, element by element: the operand
/// is split as the result (also in weight chains: a cast weight).
template <typename OpT>
struct SameSplitTpRule : public TpRule<SameSplitTpRule<OpT>, OpT> {
  llvm::LogicalResult
  getTpOperandLayouts(mlir::Operation *, mlir::OpResult, TpShard s, int64_t tp,
                      llvm::function_ref<bool(mlir::Value)>,
                      llvm::SmallVectorImpl<TpOperandLayout> &layouts) const {
    layouts.push_back(TpOperandLayout::split(s));
    return llvm::success();
  }
  bool splitsTpWeightChains(mlir::Operation *) const { return true; }
};

} // namespace smp

#endif // SMP_LIB_DIALECT_SMP_OPMODELS_OPMODELSUPPORT_H
