//===- Pipelines.h - Pass pipelines shared by smpc and smp-opt --*- C++ -*-===//
//
// The pass pipelines, built from typed options (as IREE's
// buildStreamTransformPassPipeline): smpc, the planner and smp-opt call the
// same builders, so no tool assembles a pipeline string of its own.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_PIPELINES_PIPELINES_H
#define SMP_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "smp/Pipelines/PipelineDefaults.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace smp {

/// Raises the decomposed chains exporters write (layer norm, RMS norm, GELU,
/// SiLU) into smp ops and, with `fuseAttention`, attention chains into
/// smp.attention. The ONNX importer runs it after conversion; smp-opt
/// exposes it as `smp-raise`.
void buildRaisePipeline(mlir::OpPassManager &pm, bool fuseAttention = true);

/// The phases of the training pipeline, in the order they run. The planner
/// builds some of them alone (tensor parallelism on a copy it profiles, the
/// step without any parallelism, the clean-up).
enum TrainingPhase : unsigned {
  /// smp-tensor-parallel (tp > 1).
  kPhaseTensorParallel = 1u << 0,
  /// smp-mixed-precision on every function (precision other than fp32).
  kPhaseMixedPrecision = 1u << 1,
  /// smp-pipeline-split (pp x virtual stages > 1, or micro-batches > 1).
  kPhasePipelineSplit = 1u << 2,
  /// The training step: the passes that build @train_step from @main.
  kPhaseTrainStep = 1u << 3,
  /// smp-pipeline-schedule (pp > 1 or micro-batches > 1).
  kPhasePipelineSchedule = 1u << 4,
  /// canonicalize, cse and the clean-up fusions (smp-fuse-*,
  /// smp-pack-attention).
  kPhaseCleanup = 1u << 5,
  /// smp-multi-tensor: per-parameter ops as one op over all of them.
  kPhaseMultiTensor = 1u << 6,
  kPhaseAll = (1u << 7) - 1,
};

/// The typed plan of a training compile: the parallel layout, the loss,
/// the optimizer and its hyper-parameters, and the memory-saving choices.
/// The degrees are the resolved ones (what the user pinned or the planner
/// chose); what is optional has no effect unless given.
struct TrainingPipelineOptions {
  // Parallel layout.
  int64_t dp = 1, tp = 1, pp = 1;
  /// Stages per pipeline rank (the interleaved schedule's chunks).
  int64_t virtualStages = 1;
  /// Micro-batches per step (gradient accumulation, pipelining).
  int64_t microbatches = 1;
  /// ONNX node names at which pipeline stages 1, 2, ... start (empty: the
  /// cuts balance the stages' predicted cost).
  std::vector<std::string> cuts;
  /// gpipe, 1f1b, interleaved or zb-h1.
  std::string schedule = "1f1b";
  /// Under tensor parallelism, the output (logits) whose LM head is split
  /// by vocabulary rows for a parallel cross-entropy (empty: none).
  std::string vocabParallel;
  /// Under tensor parallelism: Megatron's sequence parallelism between the
  /// regions (smp-sequence-parallel).
  bool sequenceParallel = false;
  /// Pad an LM head's vocabulary to aligned products (smp-pad-classes);
  /// smpc --no-pad-vocab turns it off.
  bool padClasses = true;
  /// Move GELUs into the products' cuBLASLt epilogues
  /// (smp-fuse-gelu-epilogue; f16/bf16); smpc --no-gelu-epilogue turns it
  /// off.
  bool fuseGeluEpilogue = true;
  /// With fuseGeluEpilogue, the GELUs' gradients too (cuBLASLt's
  /// DGELU_BGRAD; smp-fuse-gelu-epilogue{backward}); smpc --dgelu-epilogue
  /// turns it on.
  bool fuseGeluGradEpilogue = false;
  /// Sum linear layers' bias gradients in their weight-gradient products
  /// (cuBLASLt's BGRADB; smp-fuse-bias-grad; f16/bf16); smpc
  /// --no-bias-grad-epilogue turns it off.
  bool fuseBiasGrad = true;
  /// Add a residual connection in its product's cuBLASLt epilogue (C, beta
  /// = 1: smp-fuse-matmul-bias{addend}); smpc --no-residual-epilogue turns
  /// it off.
  bool fuseResidual = true;
  /// Compute a cross-entropy and its gradient in one op
  /// (smp-fuse-loss-grad); smpc --no-fuse-loss-grad turns it off.
  bool fuseLossGrad = true;
  /// fp32, bf16 or fp16.
  std::string precision = "fp32";
  /// smp-master-weights: parameters stored in bf16/fp16 are trained as f32
  /// master copies (smpc --master-weights fp32).
  bool masterWeights = false;
  /// With data parallelism, the ZeRO stage: 0 none, 1 each rank keeps 1/dp
  /// of the optimizer state (the gradients reduce-scattered at the end of
  /// the step), 2 also of the gradients (reduce-scattered in buckets as the
  /// backward makes them), 3 also of the parameters (all-gathered before
  /// each use).
  int zeroStage = 0;
  /// Hybrid sharding (MiCS, SageMaker's sharded_data_parallel_degree): the
  /// ZeRO stage shards over groups of this many data-parallel ranks and
  /// replicates across the dp / shardedDp groups (0 or dp: one group).
  int64_t shardedDp = 0;
  /// ZeRO-3: parameter gathers issued this many gathers ahead of their
  /// first use (smp-shard-parameters' prefetch).
  int64_t prefetch = 0;
  /// Data parallel: gradient all-reduce (ZeRO: reduce-scatter) buckets in
  /// MiB, and ZeRO-1/2's updated parameters' all-gather buckets (0: one
  /// collective per gradient or parameter).
  float bucketMb = 25.0f;
  /// Batch norm statistics in the step: global, replica or running.
  std::string bnStats = "global";

  // Loss and optimizer.
  /// NAME, cross_entropy:LOGITS:LABELS or mse:OUTPUT:TARGET.
  std::string loss;
  /// Parameters whose name matches this regex are not trained.
  std::string freeze;
  /// sgd, adam or adamw.
  std::string optimizer = "sgd";
  float momentum = 0.0f, dampening = 0.0f;
  bool nesterov = false;
  /// Weight decay (none given: PyTorch's default, 0.01 for adamw, else 0).
  std::optional<float> weightDecay;
  /// Parameters whose name matches this regex get no weight decay (the
  /// parameter groups of Hugging Face's Trainer and nanoGPT).
  std::string noDecay;
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1.0e-8f;
  /// Clip the gradients to this global L2 norm (none given: no clipping).
  std::optional<float> clipGradNorm;
  /// An evaluation's accuracy: the step also counts the cross-entropy's
  /// labels and its argmax hits (smp-build-gradients eval-accuracy).
  bool evalAccuracy = false;
  /// An evaluation's other metrics (smp/base/EvalMetrics.h's names): the
  /// step also counts the confusion matrix (smp-build-gradients
  /// eval-metrics).
  std::vector<std::string> evalMetrics;
  /// An evaluation's predictions: the step also returns each sample's
  /// (smp-build-gradients eval-predictions; implied by a metric of them).
  bool evalPredictions = false;
  /// ... as the logits' rows, not their argmax (eval-logits).
  bool evalLogits = false;
  /// Dynamic loss scaling (fp16), torch.amp.GradScaler's.
  bool lossScaling = false;
  float initScale = 65536.0f;
  int64_t growthInterval = 2000;
  /// DeepSpeed's loss scaler: overflows before one halves the scale (reset
  /// when it grows, or at every good step when consecutiveHysteresis), and
  /// the scale's floor (0: none, as GradScaler).
  bool deepspeedWindow = false; // DeepSpeed's stable_interval count
  int64_t hysteresis = 1;
  bool consecutiveHysteresis = false;
  double minScale = 0.0;

  // Activation memory.
  /// none, full or selective.
  std::string recompute = "none";
  /// With recompute: only these pipeline stages' ops (empty: every stage).
  std::vector<int64_t> recomputeStages;
  bool offload = false;
  int64_t offloadHorizon = 1, offloadMinBytes = 4096;

  /// The phases to build (TrainingPhase bits).
  unsigned phases = kPhaseAll;

  /// The logits of a cross-entropy loss `loss` (cross_entropy:LOGITS:LABELS),
  /// else "".
  static std::string crossEntropyLogits(llvm::StringRef loss);
};

/// Adds the training pipeline for `options` to `pm` (on builtin.module):
/// tensor parallelism, mixed precision, the pipeline stages, the passes
/// that build @train_step from @main, the pipeline schedule and the
/// clean-up, each where the plan needs it and its phase is asked for.
void buildTrainingPipeline(mlir::OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// Registers the pipelines above with the pass registry (`smp-raise`,
/// `smp-train-pipeline`).
void registerPipelines();

} // namespace smp

#endif // SMP_PIPELINES_PIPELINES_H
