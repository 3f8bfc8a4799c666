//===- StepPrediction.h - The compiled plan's step time ------*- C++ -*-===//

#ifndef SMPC_STEPPREDICTION_H
#define SMPC_STEPPREDICTION_H

#include "Options.h"
#include "mlir/IR/BuiltinOps.h"
#include "smp/Target/Artifact/ArtifactWriter.h"

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
