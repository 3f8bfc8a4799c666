//===- LossShare.h - A model's own loss split over batch shards -*- C++ -*-===//
//
// `--loss NAME` trains a scalar output the model computes itself (an export
// of a module that returns its loss). Under data parallelism and
// micro-batches each shard of the batch (a rank's micro-batch) computes that
// output from its own samples; the shards' values add up to the one-device
// loss only for particular forms. These helpers read the loss's form and
// build each shard's exact share of the one-device loss, or refuse it.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_TRANSFORMS_LOSSSHARE_H
#define SMP_DIALECT_SMP_TRANSFORMS_LOSSSHARE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace smp {

/// Compares the loss output `lossName` of `main` (imported at the
/// micro-batch size) with that of `probe` (the same model imported at
/// `factor` times that batch): a constant operand of the loss's arithmetic
/// that differs between them was folded from the batch's shape (`sum /
/// x.size(0)`). Marks the mul/div ops whose constant is proportional to the
/// batch with SmpDialect::kBatchScaledAttr; fails (an error on the op) for a
/// constant that changes otherwise, or that an add/sub adds. Where the two
/// imports differ in form within the loss's arithmetic, marks the module
/// SmpDialect::kBatchScalingUnknownAttr (buildLossShare then refuses to
/// scale by any unmarked constant); below the arithmetic (the sums and
/// means) the comparison stops.
mlir::LogicalResult markBatchScaledLossConstants(mlir::func::FuncOp main,
                                                 mlir::func::FuncOp probe,
                                                 llvm::StringRef lossName,
                                                 int64_t factor);

/// Whether the arithmetic of the loss output `lossName` of `main` (what
/// markBatchScaledLossConstants compares) multiplies or divides by a
/// constant.
bool lossScalesByConstant(mlir::func::FuncOp main, llvm::StringRef lossName);

/// The share of one batch shard (this data-parallel rank's micro-batch) of
/// the scalar loss `loss`, an f32 scalar built at `b`'s insertion point:
/// summed over the dp ranks and `microbatches` micro-batches it is the loss
/// of the whole batch on one device, and so are its gradients. Understands
/// sums (ReduceSum, a cross-entropy with reduction sum: the shard's own),
/// means (ReduceMean: the shard's / shards), a cross-entropy mean or a ratio
/// of two sums (the shard's numerator / the denominator summed over every
/// shard: a denominator computed from the inputs), terms without the batch
/// (/ shards), and adds, negations, casts and scalings of those. Anything
/// else is an error on the op that names `name` and what to do.
///
/// `stepSums` carries the denominators summed over the whole step from one
/// call to the next: an unrolled step calls this once per micro-batch on
/// clones of one loss, whose k-th denominator is the same sum, built at the
/// first micro-batch (once, not once per micro-batch) and reused.
mlir::FailureOr<mlir::Value>
buildLossShare(mlir::OpBuilder &b, mlir::Value loss, llvm::StringRef name,
               int64_t dp, int64_t microbatches,
               llvm::SmallVectorImpl<mlir::Value> &stepSums);

/// Calls `fn` on each value that the loss `loss` sums or averages over (a
/// ReduceSum's or ReduceMean's operand, a cross-entropy's logits and labels)
/// and on each other value it is computed from, through the arithmetic that
/// buildLossShare reads; stops at the first failure.
mlir::LogicalResult
forEachLossTerm(mlir::Value loss,
                llvm::function_ref<mlir::LogicalResult(mlir::Value)> fn);

} // namespace smp

#endif // SMP_DIALECT_SMP_TRANSFORMS_LOSSSHARE_H
