//===- TrainedParams.h - Which parameters a training step trains -*- C++
//-*-===//
//
// One answer, for the passes that build the step (smp-build-gradients,
// smp-master-weights) and for smpc's reports and groups (stored precision,
// the Trainer's weight-decay groups), to "does the step train this
// argument?".
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_TRAINEDPARAMS_H
#define SMP_DIALECT_SMP_IR_TRAINEDPARAMS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Regex.h"

#include <string>
#include <vector>

namespace smp {

/// The smp.param argument of `f` that `v` is, directly or through casts;
/// null for any other value.
mlir::BlockArgument paramBehind(mlir::func::FuncOp f, mlir::Value v);

/// Whether batch norm `bn` normalises with a mean and variance its forward
/// computes from its own input: a BatchNorm without running statistics
/// (track_running_stats=False), exported as its batch statistics computed
/// in the graph. It trains as stored (train() and eval() alike), with no
/// statistics to update.
bool computesOwnStatistics(mlir::Operation *bn);

/// The parameter arguments of `f` that hold a batch norm's running
/// statistics (updated by the step, never trained): read, directly or
/// through casts, as an smp.batch_norm's mean or variance, or, once the
/// training step is built, by the op that updates them (the one marked
/// smp.running_stat).
llvm::DenseSet<mlir::Value> runningStatArgs(mlir::func::FuncOp f);

/// Whether argument `i` of `f` is a parameter the step trains: an
/// smp.param of a float type, not smp.frozen (a buffer), not matched by
/// `freeze` (--freeze; null for none) and not in `runningStats`
/// (runningStatArgs(f)).
bool isTrainedParam(mlir::func::FuncOp f, unsigned i, const llvm::Regex *freeze,
                    const llvm::DenseSet<mlir::Value> &runningStats);

/// The parameters of `f` (the forward, @main) its step does not train, by
/// name, sorted: `frozen` those `freeze` (--freeze; null for none) matches,
/// `buffers` the others (smp.frozen: what PyTorch keeps as buffers or the
/// exporter folded; a batch norm's running statistics; non-float ones).
/// What smp-checkpoint list labels them.
void untrainedParams(mlir::func::FuncOp f, const llvm::Regex *freeze,
                     std::vector<std::string> &buffers,
                     std::vector<std::string> &frozen);

} // namespace smp

#endif // SMP_DIALECT_SMP_IR_TRAINEDPARAMS_H
