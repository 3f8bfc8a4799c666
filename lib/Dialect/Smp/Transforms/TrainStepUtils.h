//===- TrainStepUtils.h - Helpers of the train-step passes -----*- C++ -*-===//
//
// Stateless pieces of the training-step builder: scalar constants and
// reductions, micro-batch slices, the vocab-parallel cross-entropy, what a
// value depends on among the step's arguments, pipeline
// stage bookkeeping, and sinking weight-only ops to their users.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_TRANSFORMS_TRAINSTEPUTILS_H
#define SMP_LIB_TRANSFORMS_TRAINSTEPUTILS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace smp {

/// Whether `v` is computed from an argument of its function that `pred`
/// accepts, memoised in `memo` (a DAG walk; no cycles in a block).
bool dependsOnArgument(
    mlir::Value v, llvm::DenseMap<mlir::Value, bool> &memo,
    llvm::function_ref<bool(mlir::func::FuncOp, unsigned)> pred);

/// Whether argument `i` of `f` is a batch input (smp.input, not a step
/// scalar "@...").
bool isBatchInput(mlir::func::FuncOp f, unsigned i);

/// func @`name` of `module`; null after the error "`pass`: no func @name
/// `why`" on the module.
mlir::func::FuncOp lookupFuncOrError(mlir::ModuleOp module,
                                     llvm::StringRef name,
                                     llvm::StringRef pass, llvm::StringRef why);

/// The operand of `f`'s return that result attribute smp.output names
/// `name`; null when none does.
mlir::Value namedOutput(mlir::func::FuncOp f, llvm::StringRef name);

/// The argument of `f` that smp.input names `name`; null when none does.
mlir::BlockArgument namedInput(mlir::func::FuncOp f, llvm::StringRef name);

/// Whether pass option `option` (= `value`) is at least 1; otherwise false
/// after the error "`pass`: `option` must be >= 1, got `value`".
bool checkAtLeastOne(mlir::ModuleOp module, llvm::StringRef pass,
                     llvm::StringRef option, int64_t value);

/// For a pass's initialize(): success when string option `what` (= `value`)
/// is one of `choices`; otherwise the error "unknown `what` 'value'
/// (expected a, b or c)".
mlir::LogicalResult checkChoice(mlir::MLIRContext *ctx, llvm::StringRef what,
                                llvm::StringRef value,
                                llvm::ArrayRef<llvm::StringRef> choices);

/// 1 where `labels` is not `ignoreIndex`, else 0, as `elt` of the labels'
/// shape: the labels a cross-entropy counts (its mean's denominator, an
/// evaluation's labels).
mlir::Value keptLabels(mlir::OpBuilder &b, mlir::Location loc,
                       mlir::Value labels, int64_t ignoreIndex, mlir::Type elt);

/// A rank-0 constant of float type `elt`.
mlir::Value scalarConst(mlir::OpBuilder &b, mlir::Location loc,
                        mlir::Type elt, double v);

/// `v` reduced to a scalar over every axis (sum, or mean).
template <typename ReduceOpT>
mlir::Value reduceAll(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v) {
  auto t = mlir::cast<mlir::RankedTensorType>(v.getType());
  llvm::SmallVector<int64_t> axes;
  for (int64_t d = 0; d < t.getRank(); ++d)
    axes.push_back(d);
  return ReduceOpT::create(b, loc, v, b.getDenseI64ArrayAttr(axes), false);
}


/// `v` with f32 elements (cast when it has another float type).
mlir::Value toF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);

/// Micro-batch `i` of `m` of `full` (equal slices along dim 0).
mlir::Value sliceMicrobatch(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value full, int64_t i, int64_t m);

/// Sum over the tokens of the cross-entropy of vocab-parallel logits (see
/// TrainStepUtils.cpp). With `offsetOut` and `targetOut`: this rank's first
/// class (0-d i64) and each row's label logit summed over the tp ranks (the
/// labels' shape), for an evaluation's accuracy.
mlir::Value vocabParallelCrossEntropy(mlir::OpBuilder &b, mlir::Location loc,
                                      mlir::Value logits, mlir::Value labels,
                                      int64_t vocab,
                                      mlir::Value *offsetOut = nullptr,
                                      mlir::Value *targetOut = nullptr);

/// The loss as an f32 scalar.
mlir::Value scalarF32Loss(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value loss);

/// The pipeline stage of a value: its op's, or a parameter argument's.
std::optional<int64_t> stageOf(mlir::Value v);
void setStage(mlir::Operation *op, int64_t stage);

/// Ops without a stage that use a staged value run on the stage of their
/// first staged operand; the others stay free.
void propagateStages(mlir::Block &body, mlir::Operation *from = nullptr);

/// The op just before the builder's insertion point (nullptr at the start).
mlir::Operation *lastBefore(mlir::OpBuilder &b);

/// Moves each op on parameters and constants only right before its first
/// user (gradients complete early; copies live shorter).
void sinkWeightOnlyOps(mlir::func::FuncOp f);

/// Removes the copies that stopped a gradient (smp.cast of a value to its
/// own type marked smp.no_grad: PyTorch's `.detach()`, from the importer)
/// once the gradients are built: their readers read the value itself.
void eraseStopGradients(mlir::ModuleOp module);

} // namespace smp

#endif // SMP_LIB_TRANSFORMS_TRAINSTEPUTILS_H
