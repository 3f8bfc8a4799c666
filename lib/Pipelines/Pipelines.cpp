//===- Pipelines.cpp - Pass pipelines shared by smpc and smp-opt ----------===//

#include "smp/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;

void smp::buildRaisePipeline(OpPassManager &pm, bool fuseAttention) {
  pm.addNestedPass<func::FuncOp>(createSmpRaiseNormsPass());
  pm.addNestedPass<func::FuncOp>(createSmpRaiseActivationsPass());
  if (fuseAttention) {
    pm.addNestedPass<func::FuncOp>(createSmpRaiseAttentionPass());
    pm.addNestedPass<func::FuncOp>(createSmpAttentionLayoutPass());
  }
}

std::string smp::TrainingPipelineOptions::crossEntropyLogits(
    llvm::StringRef loss) {
  llvm::SmallVector<llvm::StringRef> parts;
  loss.split(parts, ':');
  if (parts.size() == 3 && parts[0] == "cross_entropy")
    return parts[1].str();
  return "";
}

namespace {

/// The passes that build @train_step from @main, in order (see
/// lib/Dialect/Smp/Transforms/TrainStepContract.h for the IR between them).
void buildTrainStep(OpPassManager &pm,
                    const smp::TrainingPipelineOptions &o) {
  smp::SmpBuildGradientsPassOptions gradients;
  gradients.loss = o.loss;
  gradients.freeze = o.freeze;
  gradients.dp = static_cast<int>(o.dp);
  gradients.dpShard = static_cast<int>(o.shardedDp);
  gradients.bnStats = o.bnStats;
  gradients.pipelineRanks = static_cast<int>(o.pp);
  gradients.microbatches = static_cast<int>(o.microbatches);
  gradients.lossScaling = o.lossScaling;
  gradients.initScale = o.initScale;
  gradients.evalAccuracy = o.evalAccuracy;
  gradients.evalMetrics.assign(o.evalMetrics.begin(), o.evalMetrics.end());
  gradients.evalPredictions = o.evalPredictions;
  gradients.evalLogits = o.evalLogits;
  pm.addPass(smp::createSmpBuildGradientsPass(gradients));
  if (o.recompute != "none") {
    smp::SmpRecomputePassOptions recompute;
    recompute.mode = o.recompute;
    recompute.stages.assign(o.recomputeStages.begin(),
                            o.recomputeStages.end());
    pm.addPass(smp::createSmpRecomputePass(recompute));
  }
  if (o.sequenceParallel) {
    // The backward gathers the rows again (Megatron's sequence
    // parallelism): the whole gathered values do not outlive the forward.
    smp::SmpRecomputePassOptions gathers;
    gathers.mode = "gathers";
    pm.addPass(smp::createSmpRecomputePass(gathers));
  }
  if (o.offload) {
    // Attention reads its packed projection before the activations move
    // (split q, k and v offloaded separately could not be packed after).
    pm.addNestedPass<func::FuncOp>(smp::createSmpPackAttentionPass());
    smp::SmpOffloadActivationsPassOptions offload;
    offload.horizon = static_cast<int>(o.offloadHorizon);
    offload.minBytes = static_cast<int>(o.offloadMinBytes);
    pm.addPass(smp::createSmpOffloadActivationsPass(offload));
  }
  if (o.dp > 1) {
    if (o.zeroStage == 1) {
      smp::SmpShardOptimizerStatePassOptions shard;
      shard.bucketMb = o.bucketMb;
      pm.addPass(smp::createSmpShardOptimizerStatePass(shard));
    } else if (o.zeroStage >= 2) {
      smp::SmpShardGradientsPassOptions shard;
      shard.bucketMb = o.bucketMb;
      pm.addPass(smp::createSmpShardGradientsPass(shard));
      if (o.zeroStage == 3) {
        smp::SmpShardParametersPassOptions params;
        params.prefetch = static_cast<int>(o.prefetch);
        pm.addPass(smp::createSmpShardParametersPass(params));
      }
    }
    smp::SmpGradientAllReducePassOptions allReduce;
    allReduce.bucketMb = o.bucketMb;
    pm.addPass(smp::createSmpGradientAllReducePass(allReduce));
  }
  if (o.lossScaling) {
    smp::SmpLossScalingPassOptions scaling;
    scaling.growthInterval = static_cast<int>(o.growthInterval);
    scaling.hysteresis = static_cast<int>(o.hysteresis);
    scaling.deepspeedWindow = o.deepspeedWindow;
    scaling.consecutiveHysteresis = o.consecutiveHysteresis;
    scaling.minScale = o.minScale;
    pm.addPass(smp::createSmpLossScalingPass(scaling));
  }
  smp::SmpGradientNormPassOptions norm;
  norm.clipGradNorm = o.clipGradNorm.value_or(0.0f);
  pm.addPass(smp::createSmpGradientNormPass(norm));
  smp::SmpOptimizerPassOptions optimizer;
  optimizer.optimizer = o.optimizer;
  optimizer.momentum = o.momentum;
  optimizer.dampening = o.dampening;
  optimizer.nesterov = o.nesterov;
  optimizer.weightDecay = o.weightDecay.value_or(-1.0f);
  optimizer.noDecay = o.noDecay;
  optimizer.beta1 = o.beta1;
  optimizer.beta2 = o.beta2;
  optimizer.epsilon = o.epsilon;
  optimizer.bucketMb = o.bucketMb;
  pm.addPass(smp::createSmpOptimizerPass(optimizer));
}

} // namespace

void smp::buildTrainingPipeline(OpPassManager &pm,
                                const TrainingPipelineOptions &o) {
  auto has = [&](TrainingPhase p) { return (o.phases & p) != 0; };
  if (has(kPhaseTrainStep)) {
    SmpKeyDropoutPassOptions keys;
    keys.dp = static_cast<int>(o.dp);
    keys.microbatches = static_cast<int>(o.microbatches);
    pm.addPass(createSmpKeyDropoutPass(keys));
    SmpMarkEvalPaddingPassOptions padding;
    padding.loss = o.loss;
    pm.addPass(createSmpMarkEvalPaddingPass(padding));
  }
  if (has(kPhaseTrainStep) && o.dp * o.microbatches > 1) {
    SmpCheckSampleSplitPassOptions samples;
    samples.loss = o.loss;
    samples.dp = static_cast<int>(o.dp);
    samples.microbatches = static_cast<int>(o.microbatches);
    pm.addPass(createSmpCheckSampleSplitPass(samples));
  }
  if (has(kPhaseTensorParallel) && o.tp > 1) {
    SmpTensorParallelPassOptions tp;
    tp.tp = static_cast<int>(o.tp);
    tp.vocabParallel = o.vocabParallel;
    pm.addPass(createSmpTensorParallelPass(tp));
    if (o.sequenceParallel)
      pm.addPass(createSmpSequenceParallelPass());
  }
  if (has(kPhaseMixedPrecision) && o.masterWeights) {
    SmpMasterWeightsPassOptions master;
    master.freeze = o.freeze;
    pm.addNestedPass<func::FuncOp>(createSmpMasterWeightsPass(master));
  }
  if (has(kPhaseMixedPrecision) && o.precision != "fp32") {
    SmpMixedPrecisionPassOptions mp;
    mp.precision = o.precision;
    pm.addNestedPass<func::FuncOp>(createSmpMixedPrecisionPass(mp));
  }
  bool pipelined = o.pp > 1 || o.microbatches > 1;
  if (has(kPhasePipelineSplit) && pipelined) {
    SmpPipelineSplitPassOptions split;
    split.stages = static_cast<int>(o.pp * o.virtualStages);
    split.cuts.assign(o.cuts.begin(), o.cuts.end());
    pm.addPass(createSmpPipelineSplitPass(split));
  }
  if (has(kPhaseTrainStep))
    buildTrainStep(pm, o);
  if (has(kPhasePipelineSchedule) && pipelined) {
    SmpPipelineSchedulePassOptions schedule;
    schedule.pp = static_cast<int>(o.pp);
    schedule.schedule = o.schedule;
    pm.addPass(createSmpPipelineSchedulePass(schedule));
  }
  if (has(kPhaseCleanup)) {
    pm.addNestedPass<func::FuncOp>(createSmpFuseBackwardPass());
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    // After canonicalization (transposes folded into the products' flags).
    pm.addNestedPass<func::FuncOp>(createSmpFuseMatMulBiasPass());
    if (o.fuseGeluEpilogue)
      pm.addNestedPass<func::FuncOp>(createSmpFuseGeluEpiloguePass(
          SmpFuseGeluEpiloguePassOptions{o.fuseGeluGradEpilogue}));
    if (o.fuseBiasGrad)
      pm.addNestedPass<func::FuncOp>(createSmpFuseBiasGradPass());
    pm.addNestedPass<func::FuncOp>(createSmpFuseLossCastsPass());
    if (o.padClasses)
      pm.addNestedPass<func::FuncOp>(createSmpPadClassesPass());
    if (o.fuseLossGrad)
      pm.addNestedPass<func::FuncOp>(createSmpFuseLossGradPass());
    // The residuals after the passes that match plain products and adds
    // (smp-pad-classes reads the LM head's weight-gradient product, which a
    // tied embedding's gradient adds to; smp-fuse-bias-grad the weight
    // gradients).
    if (o.fuseResidual)
      pm.addNestedPass<func::FuncOp>(
          createSmpFuseMatMulBiasPass(SmpFuseMatMulBiasPassOptions{true}));
    pm.addNestedPass<func::FuncOp>(createSmpFuseSumSquaresPass());
    pm.addNestedPass<func::FuncOp>(createSmpFuseGradCastsPass());
    pm.addNestedPass<func::FuncOp>(createSmpPackAttentionPass());
  }
  if (has(kPhaseMultiTensor))
    pm.addNestedPass<func::FuncOp>(createSmpMultiTensorPass());
}

namespace {

/// `smp-train-pipeline{...}`: the training pipeline's options as pass
/// options, for smp-opt.
struct TrainPipelineCLOptions
    : public PassPipelineOptions<TrainPipelineCLOptions> {
  Option<int64_t> dp{*this, "dp", llvm::cl::desc("data-parallel ranks"),
                     llvm::cl::init(1)};
  Option<int64_t> tp{*this, "tp", llvm::cl::desc("tensor-parallel ranks"),
                     llvm::cl::init(1)};
  Option<int64_t> pp{*this, "pp", llvm::cl::desc("pipeline ranks"),
                     llvm::cl::init(1)};
  Option<int64_t> virtualStages{*this, "virtual-stages",
                                llvm::cl::desc("stages per pipeline rank"),
                                llvm::cl::init(1)};
  Option<int64_t> microbatches{*this, "microbatches",
                               llvm::cl::desc("micro-batches per step"),
                               llvm::cl::init(1)};
  ListOption<std::string> cuts{
      *this, "cuts", llvm::cl::desc("node names at which stages 1, 2, ... start")};
  Option<std::string> schedule{*this, "schedule",
                               llvm::cl::desc("gpipe, 1f1b, interleaved or zb-h1"),
                               llvm::cl::init("1f1b")};
  Option<std::string> vocabParallel{
      *this, "vocab-parallel",
      llvm::cl::desc("logits split by vocabulary under tp (default: the "
                     "cross-entropy's logits)")};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Megatron sequence parallelism between the tp regions"),
      llvm::cl::init(false)};
  Option<bool> padClasses{
      *this, "pad-classes",
      llvm::cl::desc("pad an LM head's vocabulary (smp-pad-classes)"),
      llvm::cl::init(true)};
  Option<bool> geluEpilogue{*this, "gelu-epilogue",
                            llvm::cl::desc("GELUs into the products' epilogues "
                                           "(smp-fuse-gelu-epilogue)"),
                            llvm::cl::init(true)};
  Option<bool> dgeluEpilogue{
      *this, "dgelu-epilogue",
      llvm::cl::desc("GELU gradients into the products' epilogues too "
                     "(smp-fuse-gelu-epilogue{backward})"),
      llvm::cl::init(false)};
  Option<bool> biasGradEpilogue{
      *this, "bias-grad-epilogue",
      llvm::cl::desc("bias gradients into the weight-gradient products' "
                     "epilogues (smp-fuse-bias-grad)"),
      llvm::cl::init(true)};
  Option<bool> residualEpilogue{
      *this, "residual-epilogue",
      llvm::cl::desc("residual adds into the products' epilogues "
                     "(smp-fuse-matmul-bias{addend})"),
      llvm::cl::init(true)};
  Option<bool> fuseLossGrad{
      *this, "fuse-loss-grad",
      llvm::cl::desc("a cross-entropy and its gradient in one op "
                     "(smp-fuse-loss-grad)"),
      llvm::cl::init(true)};
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("fp32, bf16 or fp16"),
                                llvm::cl::init("fp32")};
  Option<bool> masterWeights{
      *this, "master-weights",
      llvm::cl::desc("fp32 master copies of bf16/fp16 parameters"),
      llvm::cl::init(false)};
  Option<int> zeroStage{*this, "zero-stage",
                        llvm::cl::desc("ZeRO stage 0 to 3 (with dp > 1)"),
                        llvm::cl::init(0)};
  Option<int64_t> shardedDp{
      *this, "sharded-dp",
      llvm::cl::desc("hybrid sharding: ZeRO over groups of this many dp "
                     "ranks, replicated across the groups (0: all of dp)"),
      llvm::cl::init(0)};
  Option<int> prefetch{*this, "prefetch",
                       llvm::cl::desc("ZeRO-3 gathers issued ahead"),
                       llvm::cl::init(0)};
  Option<float> bucketMb{*this, "bucket-mb",
                         llvm::cl::desc("all-reduce bucket size in MiB"),
                         llvm::cl::init(25.0f)};
  Option<std::string> bnStats{*this, "bn-stats",
                              llvm::cl::desc("global, replica or running"),
                              llvm::cl::init("global")};
  Option<std::string> loss{
      *this, "loss",
      llvm::cl::desc("NAME, cross_entropy:LOGITS:LABELS or mse:OUTPUT:TARGET")};
  Option<std::string> freeze{*this, "freeze",
                             llvm::cl::desc("regex of frozen parameters")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd, adam or adamw"),
                                llvm::cl::init("sgd")};
  Option<float> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                         llvm::cl::init(0.0f)};
  Option<float> dampening{*this, "dampening", llvm::cl::desc("SGD dampening"),
                          llvm::cl::init(0.0f)};
  Option<bool> nesterov{*this, "nesterov", llvm::cl::desc("SGD Nesterov"),
                        llvm::cl::init(false)};
  Option<float> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("weight decay (negative: PyTorch's default)"),
      llvm::cl::init(-1.0f)};
  Option<std::string> noDecay{
      *this, "no-decay",
      llvm::cl::desc("regex of parameters without weight decay")};
  Option<float> beta1{*this, "beta1", llvm::cl::desc("Adam beta1"),
                      llvm::cl::init(0.9f)};
  Option<float> beta2{*this, "beta2", llvm::cl::desc("Adam beta2"),
                      llvm::cl::init(0.999f)};
  Option<float> epsilon{*this, "eps", llvm::cl::desc("Adam epsilon"),
                        llvm::cl::init(1.0e-8f)};
  Option<float> clipGradNorm{*this, "clip-grad-norm",
                             llvm::cl::desc("global L2 norm (0: off)"),
                             llvm::cl::init(0.0f)};
  Option<bool> evalAccuracy{
      *this, "eval-accuracy",
      llvm::cl::desc("count the labels and argmax hits for an evaluation's "
                     "accuracy"),
      llvm::cl::init(false)};
  ListOption<std::string> evalMetrics{
      *this, "eval-metrics",
      llvm::cl::desc("an evaluation's metrics (smp/base/EvalMetrics.h)")};
  Option<bool> evalPredictions{
      *this, "eval-predictions",
      llvm::cl::desc("return each sample's predictions for an evaluation"),
      llvm::cl::init(false)};
  Option<bool> evalLogits{*this, "eval-logits",
                          llvm::cl::desc("the predictions as the logits' rows"),
                          llvm::cl::init(false)};
  Option<bool> lossScaling{*this, "loss-scaling",
                           llvm::cl::desc("dynamic loss scaling"),
                           llvm::cl::init(false)};
  Option<float> initScale{*this, "init-scale",
                          llvm::cl::desc("initial loss scale"),
                          llvm::cl::init(65536.0f)};
  Option<int64_t> growthInterval{
      *this, "growth-interval",
      llvm::cl::desc("good steps before the scale doubles"),
      llvm::cl::init(2000)};
  Option<bool> deepspeedWindow{
      *this, "deepspeed-window",
      llvm::cl::desc("count the window as DeepSpeed does"),
      llvm::cl::init(false)};
  Option<int64_t> hysteresis{
      *this, "hysteresis",
      llvm::cl::desc("overflows before one halves the scale"),
      llvm::cl::init(1)};
  Option<bool> consecutiveHysteresis{
      *this, "consecutive-hysteresis",
      llvm::cl::desc("reset the hysteresis at every good step"),
      llvm::cl::init(false)};
  Option<double> minScale{*this, "min-scale",
                          llvm::cl::desc("the loss scale's floor (0: none)"),
                          llvm::cl::init(0.0)};
  Option<std::string> recompute{*this, "recompute",
                                llvm::cl::desc("none, full or selective"),
                                llvm::cl::init("none")};
  ListOption<int64_t> recomputeStages{
      *this, "recompute-stages",
      llvm::cl::desc("with recompute: only these stages")};
  Option<bool> offload{*this, "offload",
                       llvm::cl::desc("activation offloading"),
                       llvm::cl::init(false)};
  Option<int64_t> offloadHorizon{*this, "offload-horizon",
                                 llvm::cl::desc("prefetches ahead"),
                                 llvm::cl::init(1)};
  Option<int64_t> offloadMinBytes{
      *this, "offload-min-bytes",
      llvm::cl::desc("smaller activations stay in device memory"),
      llvm::cl::init(4096)};

  smp::TrainingPipelineOptions toOptions() const {
    smp::TrainingPipelineOptions o;
    o.dp = dp, o.tp = tp, o.pp = pp, o.virtualStages = virtualStages;
    o.microbatches = microbatches;
    o.cuts.assign(cuts.begin(), cuts.end());
    o.schedule = schedule;
    o.vocabParallel = vocabParallel.hasValue()
                          ? vocabParallel.getValue()
                          : smp::TrainingPipelineOptions::crossEntropyLogits(loss);
    o.precision = precision;
    o.masterWeights = masterWeights;
    o.sequenceParallel = sequenceParallel;
    o.padClasses = padClasses;
    o.fuseGeluEpilogue = geluEpilogue;
    o.fuseGeluGradEpilogue = dgeluEpilogue;
    o.fuseBiasGrad = biasGradEpilogue;
    o.fuseResidual = residualEpilogue;
    o.fuseLossGrad = fuseLossGrad;
    if (zeroStage < 0 || zeroStage > 3)
      llvm::report_fatal_error("smp-train-pipeline: zero-stage must be 0 to "
                               "3, got " +
                               llvm::Twine(static_cast<int>(zeroStage)));
    o.zeroStage = zeroStage, o.bucketMb = bucketMb, o.bnStats = bnStats;
    o.prefetch = prefetch, o.shardedDp = shardedDp;
    o.loss = loss, o.freeze = freeze, o.optimizer = optimizer;
    o.momentum = momentum, o.dampening = dampening, o.nesterov = nesterov;
    if (weightDecay >= 0)
      o.weightDecay = weightDecay;
    o.noDecay = noDecay;
    o.beta1 = beta1, o.beta2 = beta2, o.epsilon = epsilon;
    if (clipGradNorm > 0)
      o.clipGradNorm = clipGradNorm;
    o.lossScaling = lossScaling, o.initScale = initScale;
    o.evalAccuracy = evalAccuracy;
    o.evalMetrics.assign(evalMetrics.begin(), evalMetrics.end());
    o.evalPredictions = evalPredictions;
    o.evalLogits = evalLogits;
    o.growthInterval = growthInterval;
    o.hysteresis = hysteresis, o.consecutiveHysteresis = consecutiveHysteresis;
    o.deepspeedWindow = deepspeedWindow;
    o.minScale = minScale;
    o.recompute = recompute;
    o.recomputeStages.assign(recomputeStages.begin(), recomputeStages.end());
    o.offload = offload, o.offloadHorizon = offloadHorizon;
    o.offloadMinBytes = offloadMinBytes;
    return o;
  }
};

} // namespace

void smp::registerPipelines() {
  PassPipelineRegistration<>(
      "smp-raise",
      "Raise decomposed layer-norm, RMS-norm, GELU and SiLU chains to smp ops "
      "and fuse attention",
      [](OpPassManager &pm) { buildRaisePipeline(pm); });
  PassPipelineRegistration<TrainPipelineCLOptions>(
      "smp-train-pipeline",
      "The training pipeline of smpc compile --train (tensor parallelism, "
      "mixed precision, pipeline stages, @train_step, schedule, clean-up, "
      "multi-tensor ops)",
      [](OpPassManager &pm, const TrainPipelineCLOptions &o) {
        buildTrainingPipeline(pm, o.toOptions());
      });
  PassPipelineRegistration<TrainPipelineCLOptions>(
      "smp-build-train-step",
      "Build func @train_step from func @main: the train-step passes of "
      "smp-train-pipeline alone (smp-build-gradients, smp-recompute, "
      "smp-offload-activations, smp-shard-optimizer-state or "
      "smp-shard-gradients, "
      "smp-gradient-all-reduce, smp-loss-scaling, smp-gradient-norm, "
      "smp-optimizer, as the options ask)",
      [](OpPassManager &pm, const TrainPipelineCLOptions &o) {
        TrainingPipelineOptions options = o.toOptions();
        options.phases = kPhaseTrainStep;
        buildTrainingPipeline(pm, options);
      });
}
