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

namespace smp {

struct PathOps {
  llvm::SmallVector<mlir::Operation *> path;      // in program order
  llvm::SmallVector<mlir::Operation *> weightOps; // on parameters only
  llvm::DenseSet<mlir::Value> weightOnly;         // params and their results
};

/// Classifies the first `limit` ops of `f`'s body (all when 0); parameters
/// are the arguments marked smp.param.
PathOps findPathOps(mlir::func::FuncOp f, size_t limit = 0);

} // namespace smp

#endif // SMP_DIALECT_SMP_TRANSFORMS_PATHOPS_H
