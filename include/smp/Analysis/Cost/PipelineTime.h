//===- PipelineTime.h - A pipeline's ranks side by side ---------*- C++ -*-===//
//
// The step time of a compiled pipeline: its rank functions (one per
// pipeline rank, train_step_pp0, train_step_pp1, ..., in the order their
// sends and receives name them) run side by side, each one op after another
// at estimateOp's times, the receives waiting for their messages. This
// prices what the schedule actually compiled to: stages of unequal time (the
// last one computes the loss, the first one the embedding), the order of
// every rank's micro-batches and the messages between them, where the
// schedule's unit-cost bubble assumes equal stages and free messages.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_ANALYSIS_COST_PIPELINETIME_H
#define SMP_ANALYSIS_COST_PIPELINETIME_H

#include "smp/Analysis/Cost/CostModel.h"
#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <vector>

namespace smp {

struct PipelineEstimate {
  /// When the last rank finishes its step (time starts at 0 on every rank).
  double stepSeconds = 0;
  /// Per rank: when it finishes, the time of its own ops (measured or
  /// modelled, communication included) and the time its receives waited.
  std::vector<double> finishSeconds, busySeconds, waitSeconds;
  size_t measuredOps = 0, modelledOps = 0;
  /// Non-empty when the ranks cannot all finish: a receive whose send no
  /// rank makes, or ranks waiting for each other (nothing is estimated).
  std::string error;

  /// 1 - the ranks' busy time / (ranks x step): the share of the step the
  /// ranks wait.
  double bubble() const;
};

/// Runs `ranks` side by side on `device`. Each op takes estimateOp's time
/// (a receive's measured time is not used: it includes the wait this model
/// adds itself). A send is eager, as the runtime's are (MPI's copy and
/// Isend, NCCL's pipes): the sender spends the send's time (on a device
/// that overlaps communication, unmeasured, a launch: the pipe's stream
/// carries it) and goes on, and its message arrives the point-to-point time
/// of its bytes after the send started. A receive ends when the rank reaches it
/// or its message arrives, whichever is later. Messages are matched by (sender,
/// receiver, tag), several of one key in order.
PipelineEstimate estimatePipeline(llvm::ArrayRef<mlir::func::FuncOp> ranks,
                                  const DeviceSpec &device,
                                  const ProfileDB *profile = nullptr);

} // namespace smp

#endif // SMP_ANALYSIS_COST_PIPELINETIME_H
