//===- SmpOps.h - smp dialect operations ------------------------*- C++ -*-===//

#ifndef SMP_DIALECT_SMP_IR_SMPOPS_H
#define SMP_DIALECT_SMP_IR_SMPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpTraits.h"

#define GET_OP_CLASSES
#include "smp/Dialect/Smp/IR/SmpOps.h.inc"

namespace smp {
/// The classes of a cross-entropy's (or its gradient's) logits: `attr` or
/// the last dim; outside [1, last dim] an error at `loc` naming `op`.
mlir::LogicalResult crossEntropyClasses(std::optional<mlir::Location> loc,
                                        llvm::StringRef op,
                                        mlir::RankedTensorType logits,
                                        std::optional<int64_t> attr,
                                        int64_t &classes);
/// Each result of `op` that may take an operand's storage, written in
/// place where that operand is read by nothing after `op` (the caller's
/// liveness decides that), with that operand; none for any other op.
/// cross_entropy_grad, cross_entropy_shard_grad and cross_entropy_with_grad
/// (its gradient, result 1): the logits, when only the loss ops read them
/// and the gradient has their type (their kernels read each logit before
/// writing its gradient); shard.all_reduce: its input, of the result's type
/// (NCCL and MPI reduce in place: a gradient bucket is one buffer from its
/// concatenation to its split, which the runtime's communication stream
/// works on while compute goes on); sgd_update and sgd_update_multi: each
/// new momentum buffer over its momentum buffer (the kernels read a chunk
/// before writing it; plain SGD, momentum 0, passes each gradient as its
/// buffer and writes no buffer: without this, a parameter's size of the
/// arena at the update for nothing); add_multi: each sum over the first of
/// its operands of its type, f32 (the micro-batches' accumulated gradient;
/// each element is read before it is written). The artifact writer shares the
/// storage; the planner's memory model counts it so.
llvm::SmallVector<std::pair<unsigned, mlir::Value>>
inPlaceOperands(mlir::Operation *op);
} // namespace smp

#endif // SMP_DIALECT_SMP_IR_SMPOPS_H
