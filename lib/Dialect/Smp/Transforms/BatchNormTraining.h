//===- BatchNormTraining.h - Batch norm in train() mode ---------*- C++ -*-===//
//
// Part of smp-build-gradients: every smp.batch_norm of the training step
// normalises with the batch's statistics and updates its running statistics
// as PyTorch's train() mode does (see BatchNormTraining.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_TRANSFORMS_BATCHNORMTRAINING_H
#define SMP_LIB_TRANSFORMS_BATCHNORMTRAINING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <utility>

namespace smp {

/// Whose batch the statistics are under data parallelism: `global` sums
/// over the dp ranks (SyncBatchNorm: any plan equals one device), `replica`
/// keeps each rank's own (DDP's default BatchNorm).
enum class BatchNormStats { Global, Replica };

/// One running statistic (mean or variance) that the step updates.
struct RunningStat {
  /// The parameter argument holding it (smp.param).
  mlir::BlockArgument arg;
  std::string name;
};

/// Rewrites every smp.batch_norm of `f` (the step's forward, before
/// autodiff) to normalise with its batch's mean and biased variance, and
/// builds each running statistic's update `running * momentum + batch * (1 -
/// momentum)` (the variance's unbiased, as PyTorch). The op reading the old
/// value carries `smp.running_stat = NAME` (see chainRunningStats). Errors
/// (statistics that are not parameters of their own, one value per channel)
/// name the node. Returns the running statistics.
mlir::FailureOr<llvm::SmallVector<RunningStat>>
trainBatchNorms(mlir::func::FuncOp f, int64_t dp, BatchNormStats stats);

/// After the forward was copied per micro-batch: each micro-batch's update
/// starts from the previous micro-batch's result (in program order, as
/// PyTorch running the module once per micro-batch). Returns each running
/// statistic's name with its final value.
llvm::SmallVector<std::pair<std::string, mlir::Value>>
chainRunningStats(mlir::func::FuncOp f, llvm::ArrayRef<RunningStat> stats);

} // namespace smp

#endif // SMP_LIB_TRANSFORMS_BATCHNORMTRAINING_H
