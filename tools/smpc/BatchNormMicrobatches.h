//===- BatchNormMicrobatches.h - Batch norms and micro-batches -*- C++ -*-===//
//
// A batch norm trained in train() mode normalises over its batch. With
// micro-batches each normalises over its micro-batch instead (PyTorch
// running the module once per micro-batch with gradient accumulation):
// another model than one device's step over the whole batch. smpc trains so
// only when asked to (--microbatches); the planner plans one micro-batch
// for such a model, and --pp's default of pp micro-batches is refused.
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_BATCHNORMMICROBATCHES_H
#define SMPC_BATCHNORMMICROBATCHES_H

#include "mlir/IR/BuiltinOps.h"

#include <optional>

struct Options;
struct PlanCommand;

namespace smpc {

/// The first of `module`'s batch norms that a training step normalises
/// with their batch's statistics (--bn-stats global or replica), and how
/// many there are.
struct BatchStatisticNorms {
  mlir::Operation *first = nullptr;
  int64_t count = 0;
};
BatchStatisticNorms batchStatisticNorms(mlir::ModuleOp module,
                                        llvm::StringRef bnStats);

/// The planner's request (which plans training) for such a model: one
/// micro-batch a step unless
/// --microbatches or --microbatch-size pins them (a note says so).
void planBatchNormMicrobatches(mlir::ModuleOp module, const Options &opts,
                               PlanCommand &cmd, bool note);

/// A compile of pinned degrees: micro-batches that --pp chose by default
/// are refused (an exit code), ones --microbatches asked for are warned of.
std::optional<int> checkBatchNormMicrobatches(mlir::ModuleOp module,
                                              const Options &opts);

} // namespace smpc

#endif // SMPC_BATCHNORMMICROBATCHES_H
