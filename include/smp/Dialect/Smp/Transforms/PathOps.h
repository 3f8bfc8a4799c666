//===- PathOps.h - The ops on the parameters' path --------------*- C++ -*-===//
//
// How the partitioning passes and the planner see a forward function: ops
// that compute on both the inputs and the parameters (the path: they get
// pipeline stages, in program order), ops on parameters and constants only
// (weight transposes, masks kept as buffers: they follow their users), and
// ops on inputs and constants only (free: recomputed wherever needed).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_TRANSFORMS_PATHOPS_H
#define SMP_DIALECT_SMP_TRANSFORMS_PATHOPS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

namespace smp {

struct PathOps {
  llvm::SmallVector<mlir::Operation *> path;      // in program order
  llvm::SmallVector<mlir::Operation *> weightOps; // on parameters only
  llvm::DenseSet<mlir::Value> weightOnly;         // params and their results
};

/// Classifies the first `limit` ops of `f`'s body (all when 0); parameters
/// are the arguments marked smp.param.
PathOps findPathOps(mlir::func::FuncOp f, size_t limit = 0);

/// The ops of `body` computed from one of `params` alone (and constants),
/// in block order, each with that parameter: smp ops with one result, no
/// side effects and no regions (a weight's transpose, reshape or cast).
/// ZeRO-3 redoes them on each gathered copy (smp-shard-parameters, and the
/// planner's liveness of it).
llvm::MapVector<mlir::Operation *, mlir::Value>
singleWeightOps(mlir::Block &body, llvm::ArrayRef<mlir::Value> params);

/// A cast to a float type narrower than its operand's (mixed precision's
/// low-precision copy). smp-shard-parameters applies one of a parameter to
/// the rank's chunk before the gather; the planner counts it so.
bool isNarrowingCast(mlir::Operation *op);

} // namespace smp

#endif // SMP_DIALECT_SMP_TRANSFORMS_PATHOPS_H
