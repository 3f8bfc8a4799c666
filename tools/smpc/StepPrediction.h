//===- StepPrediction.h - The compiled plan's step time ------*- C++ -*-===//

#ifndef SMPC_STEPPREDICTION_H
#define SMPC_STEPPREDICTION_H

#include "Options.h"
#include "mlir/IR/BuiltinOps.h"
#include "smp/Analysis/Cost/CostModel.h"
#include "smp/Target/Artifact/ArtifactWriter.h"

#include <string>

/// The compiled step's time on `device`: a pipeline's rank functions run
/// side by side (smp::estimatePipeline), any other plan's step function
/// alone (the slowest, skipping `main` when `training`).
struct CompiledStepTime {
  double seconds = 0;
  size_t measured = 0, modelled = 0; // ops measured in the profile or not
  std::string how;                   // "slowest rank", "4 pipeline ranks ..."
};
CompiledStepTime compiledStepTime(mlir::ModuleOp module, bool training,
                                  const smp::DeviceSpec &device,
                                  const smp::ProfileDB *profile = nullptr);

/// The step time on this plan's ranks into `artifact` (predictedStepSeconds
/// and predictionSource, reported in plan.txt and plan.json), printed with
/// --profile-db: measured op times (--profile-db) preferred over the
/// roofline of the target's device (--cluster, else the target's default);
/// a pipeline's rank functions run side by side (smp::estimatePipeline), any
/// other plan's step function alone. Returns 1 after printing an error (an
/// unreadable profile or cluster), else 0.
int predictStepTime(mlir::ModuleOp module, const Options &opts,
                    smp::ArtifactOptions &artifact);

#endif // SMPC_STEPPREDICTION_H
