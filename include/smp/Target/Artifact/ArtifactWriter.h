//===- ArtifactWriter.h - smp module -> model.smpx --------------*- C++ -*-===//

#ifndef SMP_TARGET_ARTIFACT_ARTIFACTWRITER_H
#define SMP_TARGET_ARTIFACT_ARTIFACTWRITER_H

#include "mlir/IR/BuiltinOps.h"
#include "smp/Target/Artifact/WeightSource.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <vector>
#include <string>

namespace smp {

/// Training settings recorded in the manifest for smprun.
struct TrainingOptions {
  std::string loss, optimizer;
  /// --no-decay (the optimizer spec names it).
  std::string noDecay;
  double lr = 0;
  std::string lrSchedule = "constant";
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0; // 0: the run's --steps
  int64_t evalEvery = 0;  // smprun --eval-data's default --eval-every
  double evalDelay = 0;   // no evaluation before (steps; epochs: every -1)
  bool evalOnStart = false; // also evaluate before the first step
  bool shiftLabels = false; // smprun shifts the labels (smpc --shift-labels)
  int64_t evalBatch = 0;    // samples of an evaluation's batch (0: global)
  /// What an evaluation reports besides the loss (smpc --eval-accuracy,
  /// --eval-metrics: smp/base/EvalMetrics.h's names).
  std::vector<std::string> evalMetrics;
  /// DeepSpeed's schedules (warmup-lr, warmup-decay-lr, warmup-cosine-lr):
  /// the warmup's shape, its start and the cosine's floor.
  std::string warmupType = "log";
  double warmupMin = 0, cosMinRatio = 0;
  int64_t batchSize = 0;
  int64_t microbatches = 1; // per step
  uint64_t seed = 0;        // of the dropout masks (smpc --seed)
  std::string precision = "fp32";
  /// Parameters the file stores in bf16/fp16, trained as stored (smpc's
  /// StoredPrecision.h): plan.txt's "parameters:" line; "" when none.
  std::string storedParameters;
  /// Activation memory: recompute none/full/selective (only the pipeline
  /// stages `recomputeStages` lists, when it lists any) and offloading.
  std::string recompute = "none";
  std::vector<int64_t> recomputeStages;
  bool offload = false;
  /// The ZeRO stage (plan.txt says how the gradients are summed).
  int zeroStage = 0;
  std::string sourceModel; // absolute path, for smprun --save-onnx
  /// The parameters the step does not train (smp::untrainedParams):
  /// checkpoints label them.
  std::vector<std::string> buffers, frozen;
};

struct ArtifactOptions {
  std::string outputDir;     // the model.smpx directory (created)
  std::string target = "cpu";
  std::string producer;      // "smpc 0.1.0"
  /// The device the plan was made for and its peak FLOP/s for the compute
  /// precision (smprun's MFU).
  std::string device;
  double peakFlops = 0;
  /// Set when the module holds @train_step: smprun then trains.
  std::optional<TrainingOptions> training;
  /// For plan.txt and plan.json: the smpc command that reproduces this
  /// artifact's plan, the predicted step time (0: none) and what it comes
  /// from, and the planner's JSON report when the planner chose the plan.
  std::string command;
  double predictedStepSeconds = 0;
  std::string predictionSource;
  std::string plannerJson;
};

/// Summary of what was written, for the driver to print.
struct ArtifactSummary {
  uint64_t arenaBytes = 0;
  uint64_t weightsBytes = 0;
  size_t numInstructions = 0;
  size_t numBuffers = 0;
};

/// Lowers `func @train_step` (or, without one, `func @main`) of an smp module to one rank's instruction stream
/// over buffers with a static memory plan, and writes the artifact directory
/// (manifest, program, weights, final IR, plan report).
llvm::Expected<ArtifactSummary> writeArtifact(mlir::ModuleOp module,
                                              WeightSource &weights,
                                              const ArtifactOptions &options);

/// The device arena each pipeline rank of `module` would get (tensor rank
/// 0; the same program as writeArtifact's, without reading any weights):
/// the memory the runtime allocates and fills, i.e. its high-water mark.
llvm::Expected<std::vector<uint64_t>> planArenaBytes(mlir::ModuleOp module);

} // namespace smp

#endif // SMP_TARGET_ARTIFACT_ARTIFACTWRITER_H
