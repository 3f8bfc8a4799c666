//===- smpc.cpp - The smp compiler driver ---------------------------------===//
//
// smpc import  MODEL [-o OUT.mlir] [--dim NAME=VALUE]... [--no-raise]
// smpc summary MODEL [--dim NAME=VALUE]...
// smpc ops
//
// MODEL is an ONNX file (.onnx, or .onnxtxt in ONNX text syntax) or smp
// dialect MLIR text (.mlir). Errors are one line on stderr, exit code 1.
//
//===----------------------------------------------------------------------===//

#include "BatchNormMicrobatches.h"
#include "Diagnostics.h"
#include "ExportSidecar.h"
#include "ModelSummary.h"
#include "Options.h"
#include "PlanCommand.h"
#include "Reproduce.h"
#include "StepPrediction.h"
#include "StoredPrecision.h"
#include "TrainerGroups.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "smp/Analysis/Cost/CostModel.h"
#include "smp/Dialect/Smp/IR/SizeLimits.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/TrainedParams.h"
#include "smp/Dialect/Smp/Transforms/LossShare.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "smp/Frontend/ONNX/Importer.h"
#include "smp/InitAll.h"
#include "smp/Pipelines/Pipelines.h"
#include "smp/Planner/Planner.h"
#include "smp/Target/Artifact/ArtifactWriter.h"
#include "smp/Target/Artifact/DeviceGrid.h"
#include "smp/Version.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

using namespace mlir;

namespace {

/// A model's own loss (--loss NAME) split over data-parallel ranks or
/// micro-batches: which constants of its arithmetic were folded from the
/// batch's shape, found by a second import at twice the micro-batch
/// (LossShare.h). When that import fails, the module says so and such a
/// constant is refused rather than guessed. Unsplit, an evaluation's
/// padded short batch still needs to know (smp-mark-eval-padding: a
/// constant folded from the batch's shape holds the global batch's), so a
/// loss that scales by a constant is compared too, a failure marking the
/// module rather than stopping the compile.
LogicalResult markBatchScaledLoss(MLIRContext &ctx, const Options &opts,
                                  ModuleOp module) {
  llvm::StringRef loss = opts.plan.loss;
  if (!opts.train || loss.empty() || loss.contains(':') ||
      opts.import.batchSize <= 0)
    return success();
  // Unsplit, only an evaluation's padded short batch needs to know (smp-
  // mark-eval-padding), and only of a constant: no error, an unknown.
  bool split = opts.import.batchSplit > 1;
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!split && (!main || !smp::lossScalesByConstant(main, loss)))
    return success();
  smp::onnx_frontend::ImportOptions probeOpts = opts.import;
  probeOpts.batchSize *= 2;
  probeOpts.globalBatch *= 2;
  llvm::Expected<OwningOpRef<ModuleOp>> probe = OwningOpRef<ModuleOp>();
  {
    ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
    probe = smp::onnx_frontend::importONNXFile(ctx, opts.input, probeOpts);
  }
  func::FuncOp probeMain;
  if (probe)
    probeMain = (**probe).lookupSymbol<func::FuncOp>("main");
  else
    llvm::consumeError(probe.takeError());
  auto unknown = [&] {
    module->setAttr(smp::SmpDialect::kBatchScalingUnknownAttr,
                    UnitAttr::get(&ctx));
    return success();
  };
  if (!main || !probeMain)
    return unknown();
  if (split)
    return smp::markBatchScaledLossConstants(main, probeMain, loss, 2);
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  if (failed(smp::markBatchScaledLossConstants(main, probeMain, loss, 2)))
    return unknown();
  return success();
}

/// Loads MODEL as an smp module, from ONNX or MLIR text.
FailureOr<OwningOpRef<ModuleOp>> loadModule(MLIRContext &ctx,
                                            const Options &opts) {
  llvm::StringRef path = opts.input;
  if (path.ends_with(".mlir")) {
    std::string err;
    auto file = openInputFile(path, &err);
    if (!file) {
      fail(path + ": " + err);
      return failure();
    }
    llvm::SourceMgr sm;
    sm.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    unsigned errors = OneLineDiagnostics::errorCount();
    OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sm, &ctx);
    if (!module) {
      if (OneLineDiagnostics::errorCount() == errors)
        fail(path + ": invalid smp MLIR");
      return failure();
    }
    if (llvm::Error e = smp::checkSizeLimits(*module, path)) {
      fail(llvm::toString(std::move(e)));
      return failure();
    }
    return module;
  }
  auto module = smp::onnx_frontend::importONNXFile(ctx, path, opts.import);
  if (!module) {
    fail(llvm::toString(module.takeError()));
    return failure();
  }
  if (failed(markBatchScaledLoss(ctx, opts, **module)))
    return failure();
  return std::move(*module);
}

/// The weights of a module: the ONNX file named by its smp.source attribute
/// (relative paths are tried from the working directory, then from the
/// directory of the .mlir file).
llvm::Expected<std::unique_ptr<smp::WeightSource>>
openWeights(ModuleOp module, const Options &opts) {
  auto source = module->getAttrOfType<StringAttr>("smp.source");
  if (!source)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        opts.input + ": the module has no smp.source attribute naming the "
                     "model file that holds its weights");
  std::string path = source.str();
  if (!llvm::sys::fs::exists(path) && !llvm::sys::path::is_absolute(path)) {
    llvm::SmallString<256> alt(llvm::sys::path::parent_path(opts.input));
    llvm::sys::path::append(alt, path);
    if (llvm::sys::fs::exists(alt))
      path = alt.str().str();
  }
  return smp::onnx_frontend::openONNXWeights(path);
}

/// The planner's stage cuts as --pp-cuts (empty when the planner's stages
/// are not the compiled ones: interleaved chunks, or unnamed ops).
std::string plannedCuts(const smp::Plan &p) {
  if (p.pp <= 1 || p.virtualStages != 1 || p.cuts.empty())
    return "";
  std::string cuts;
  for (const std::string &c : p.cuts) {
    if (llvm::StringRef(c).starts_with("op #") || c.find(',') != std::string::npos)
      return "";
    cuts += (cuts.empty() ? "" : ",") + c;
  }
  return cuts;
}

/// The planner's memory choices for `p` in the training plan: the ZeRO stage,
/// offloading and (unless `recompute` is false) full recomputation of the
/// stages it chose.
void applyPlannedMemory(const smp::Plan &p, smp::TrainingPipelineOptions &plan,
                        bool recompute = true) {
  if (p.zeroStage > 0)
    plan.zeroStage = p.zeroStage;
  if (p.zeroStage > 0 && p.shardRanks() < p.dp)
    plan.shardedDp = p.shardRanks();
  plan.sequenceParallel = p.sequenceParallel;
  if (p.offload)
    plan.offload = true;
  if (!recompute || !p.recompute)
    return;
  plan.recompute = "full";
  plan.recomputeStages.clear();
  if (!llvm::all_of(p.stageRecompute, [](bool r) { return r; }))
    for (size_t k = 0; k < p.stageRecompute.size(); ++k)
      if (p.stageRecompute[k])
        plan.recomputeStages.push_back(static_cast<int64_t>(k));
}

/// What the command line pins for the planner (smpc plan, and smpc compile
/// --devices N without pinned degrees); the rest is searched.
PlanCommand planRequest(const Options &opts) {
  PlanCommand cmd;
  cmd.devices = opts.devices;
  cmd.cluster = opts.cluster;
  cmd.globalBatch = opts.globalBatch;
  cmd.loss = opts.plan.loss;
  cmd.optimizer = opts.plan.optimizer;
  cmd.precision = opts.plan.precision;
  cmd.masterWeights = opts.plan.masterWeights;
  cmd.freeze = opts.plan.freeze;
  cmd.optimize = opts.optimize;
  cmd.dp = opts.pinned.dp;
  cmd.tp = opts.pinned.tp;
  cmd.pp = opts.pinned.pp;
  if (opts.microbatchSize)
    cmd.microbatchSize = opts.microbatchSize;
  cmd.microbatches = opts.pinned.microbatches;
  cmd.schedule = opts.pinned.schedule;
  if (opts.plan.virtualStages > 1)
    cmd.virtualStages = opts.plan.virtualStages;
  cmd.zeroStage = opts.pinned.zeroStage;
  // --sharded-dp without --zero-stage is sharded data parallelism: ZeRO-3.
  cmd.shardedDp = opts.pinned.shardedDp;
  if (opts.given.count("--bucket-mb"))
    cmd.bucketMb = opts.plan.bucketMb;
  // As compile will build it; smpc plan's default follows the cluster's
  // devices (PlanCommand.cpp).
  if (opts.command == "compile" || opts.given.count("--gather-prefetch"))
    cmd.gatherPrefetch = gatherPrefetchOf(opts);
  cmd.sequenceParallel = opts.pinned.sequenceParallel;
  if (cmd.shardedDp && !cmd.zeroStage)
    cmd.zeroStage = 3;
  if (opts.pinned.recompute == "none" || opts.pinned.recompute == "full")
    cmd.recompute = opts.pinned.recompute == "full";
  if (opts.pinned.offload)
    cmd.offload = true;
  return cmd;
}

/// Builds @train_step with the training pipeline of the plan (`plan`: opts'
/// with --hf-no-decay's groups).
LogicalResult buildTrainStep(ModuleOp module, const Options &opts,
                             const smp::TrainingPipelineOptions &plan) {
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  if (opts.printAfterAll) {
    module.getContext()->disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true,
                        /*printAfterOnlyOnChange=*/false);
  }
  smp::buildTrainingPipeline(pm, plan);
  unsigned errors = OneLineDiagnostics::errorCount();
  if (failed(pm.run(module))) {
    if (OneLineDiagnostics::errorCount() == errors)
      fail(opts.input + ": cannot build the training step");
    return failure();
  }
  return success();
}

/// compile()'s exit code for an auto-planned step whose compiled arena is
/// over the planner's limit (nothing written; main plans again).
constexpr int kOverPlannedMemory = 3;

/// An auto-planned compile: each pipeline rank's arena from the compiler's
/// memory plan against the planner's limit. Returns 0 when all fit, else
/// kOverPlannedMemory with `largest` the largest arena (a note says which
/// rank and by how much), or 1 on an error.
int checkPlannedArenas(ModuleOp module, const Options &opts,
                       uint64_t &largest) {
  const Options::PlannedMemory &pm = *opts.plannedMemory;
  auto arenas = smp::planArenaBytes(module);
  if (!arenas)
    return fail(opts.input + ": " + llvm::toString(arenas.takeError()));
  largest = 0;
  size_t rank = 0;
  for (size_t r = 0; r < arenas->size(); ++r)
    if ((*arenas)[r] > largest)
      largest = (*arenas)[r], rank = r;
  if (static_cast<double>(largest) <= pm.limitBytes)
    return 0;
  llvm::errs() << llvm::formatv(
      "smpc: note: the planned {0} compiles to an arena of {1} bytes on "
      "pipeline rank {2}, over the planner's limit of {3:F0} bytes "
      "({4:P0} of the device's {5:F0}); the planner's estimate was {6:F0} "
      "bytes ({7:F1}%)\n",
      pm.summary, largest, rank, pm.limitBytes, pm.limitBytes / pm.deviceBytes,
      pm.deviceBytes, pm.estimateBytes,
      100.0 * (pm.estimateBytes - static_cast<double>(largest)) /
          static_cast<double>(largest));
  return kOverPlannedMemory;
}

/// What the manifest records of the training step compiled from `opts`
/// with `plan` (its --hf-no-decay groups resolved); `stored` is plan.txt's
/// "parameters:" line.
smp::TrainingOptions trainingOptions(ModuleOp module, const Options &opts,
                                     const smp::TrainingPipelineOptions &plan,
                                     const std::string &stored) {
  smp::TrainingOptions t;
  t.loss = opts.plan.loss;
  t.optimizer = opts.plan.optimizer;
  t.noDecay = plan.noDecay;
  t.lr = opts.lr;
  t.lrSchedule = opts.lrSchedule;
  t.warmupSteps = opts.warmupSteps;
  t.decaySteps = opts.decaySteps;
  t.evalEvery = opts.evalEvery;
  t.evalDelay = opts.evalDelay;
  t.evalOnStart = opts.evalOnStart;
  t.shiftLabels = opts.shiftLabels;
  t.evalBatch = opts.evalBatch;
  if (opts.plan.evalAccuracy)
    t.evalMetrics.push_back("accuracy");
  llvm::append_range(t.evalMetrics, opts.plan.evalMetrics);
  t.warmupType = opts.warmupType;
  t.warmupMin = opts.warmupMin;
  // DeepSpeed's WarmupCosineLR floors at 0.0001 unless told; Hugging
  // Face's cosine at 0 (its "cosine"; "cosine_with_min_lr" gives one).
  t.cosMinRatio =
      opts.lrSchedule == "hf-cosine" && !opts.given.count("--cos-min-ratio")
          ? 0.0
          : opts.cosMinRatio;
  t.seed = opts.seed;
  t.microbatches = opts.plan.microbatches;
  t.precision = opts.plan.precision;
  t.storedParameters = stored;
  t.recompute = opts.plan.recompute;
  t.recomputeStages = opts.plan.recomputeStages;
  t.offload = opts.plan.offload;
  t.zeroStage = opts.plan.zeroStage;
  if (auto source = module->getAttrOfType<StringAttr>("smp.source")) {
    llvm::SmallString<256> abs(source.getValue());
    llvm::sys::fs::make_absolute(abs);
    t.sourceModel = abs.str().str();
  }
  return t;
}

int compile(ModuleOp module, const Options &opts,
            uint64_t *largestArena = nullptr) {
  auto weights = openWeights(module, opts);
  if (!weights)
    return fail(llvm::toString(weights.takeError()));
  smp::ArtifactOptions artifact;
  std::string storedText; // plan.txt's "parameters:" line
  bool computes16 = opts.plan.precision != "fp32";
  if (opts.train) {
    if (auto rc = smpc::checkBatchNormMicrobatches(module, opts))
      return *rc;
    smp::DeviceGrid grid;
    grid.order = *smp::DeviceGrid::parsePlacement(opts.placement);
    module->setAttr(smp::SmpDialect::kPlacementAttr,
                    StringAttr::get(module.getContext(),
                                    grid.placementLetters()));
    // --hf-no-decay: the Trainer's groups, by name.
    smp::TrainingPipelineOptions plan = opts.plan;
    if (opts.hfNoDecay)
      plan.noDecay = smpc::exactNamesRegex(
          smpc::trainerNoDecayNames(module, opts.plan.freeze));
    // Parameters stored in bf16/fp16 are trained as stored, computing in
    // the file's types (StoredPrecision.h): no mixed-precision pass.
    smpc::StoredPrecision stored =
        smpc::storedPrecision(module, opts.plan.freeze);
    if (auto why = smpc::checkStoredPrecision(stored, opts))
      return fail(*why);
    smpc::warnStoredPrecision(stored, opts);
    storedText = smpc::describeStoredPrecision(stored, opts.plan.masterWeights);
    if (stored.any16Bit())
      plan.precision = "fp32";
    computes16 = computes16 || stored.mostly16Bit();
    // What the forward holds besides what the step trains (checkpoints
    // label them), read before the step is built.
    std::vector<std::string> buffers, frozen;
    if (auto main = module.lookupSymbol<func::FuncOp>("main")) {
      llvm::Regex freeze(opts.plan.freeze);
      smp::untrainedParams(main, opts.plan.freeze.empty() ? nullptr : &freeze,
                           buffers, frozen);
    }
    if (failed(buildTrainStep(module, opts, plan)))
      return 1;
    if (opts.plannedMemory && largestArena)
      if (int rc = checkPlannedArenas(module, opts, *largestArena))
        return rc;
    artifact.training = trainingOptions(module, opts, plan, storedText);
    artifact.training->buffers = std::move(buffers);
    artifact.training->frozen = std::move(frozen);
  } else {
    // Which outputs smprun may compute over a dataset batch by batch.
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    pm.addPass(smp::createSmpMarkSampleOutputsPass());
    if (failed(pm.run(module)))
      return fail(opts.input + ": cannot follow the samples");
  }
  if (int rc = predictStepTime(module, opts, artifact))
    return rc;
  artifact.command = reproducingCommand(opts);
  artifact.plannerJson = opts.autoPlanJson;
  if (opts.emitMlir) {
    std::string err;
    auto out = openOutputFile(opts.output, &err);
    if (!out)
      return fail(opts.output + ": " + err);
    module.print(out->os());
    out->keep();
    return 0;
  }
  artifact.outputDir = opts.output;
  artifact.target = opts.target;
  // The device whose peak smprun's MFU is a fraction of: the planner's
  // cluster, else the target's default device.
  {
    auto device = smp::loadDeviceSpec(
        opts.cluster.empty() ? (opts.target == "cuda" ? "h100-sxm-80g" : "cpu")
                             : opts.cluster);
    if (!device)
      return fail(llvm::toString(device.takeError()));
    artifact.device = device->name.empty() ? opts.cluster : device->name;
    artifact.peakFlops =
        computes16 ? device->matrixFlops16 : device->matrixFlops32;
  }
  artifact.producer = std::string("smpc ") + SMP_VERSION;
  auto summary = smp::writeArtifact(module, **weights, artifact);
  if (!summary)
    return fail(llvm::toString(summary.takeError()));
  llvm::outs() << "wrote " << opts.output << ": " << summary->numInstructions
               << " instructions, " << summary->numBuffers << " buffers, arena "
               << summary->arenaBytes << " bytes (weights "
               << summary->weightsBytes << " bytes); plan report in "
               << opts.output << "/plan.txt\n";
  return 0;
}

/// Why the batch of the model cannot be split over data-parallel ranks or
/// micro-batches (its forward mixes the samples, or its own loss has no
/// per-shard share), or "" when it can: the two checks a split compile
/// makes, run at dp 2 on an import at two samples a micro-batch (at one, the
/// samples' dim is ambiguous). "" for smp MLIR, written at its batch: the
/// compile checks it.
std::string whyBatchCannotSplit(MLIRContext &ctx, const Options &opts) {
  if (llvm::StringRef(opts.input).ends_with(".mlir"))
    return "";
  std::string why;
  ScopedDiagnosticHandler capture(&ctx, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error && why.empty())
      why = d.str();
    return success();
  });
  smp::onnx_frontend::ImportOptions two = opts.import;
  two.batchSize = 2;
  two.globalBatch = 0;
  two.batchSplit = 1;
  auto copy = smp::onnx_frontend::importONNXFile(ctx, opts.input, two);
  if (!copy)
    return llvm::toString(copy.takeError());
  PassManager pm(&ctx, ModuleOp::getOperationName());
  smp::SmpCheckSampleSplitPassOptions samples;
  samples.loss = opts.plan.loss;
  samples.dp = 2;
  pm.addPass(smp::createSmpCheckSampleSplitPass(samples));
  if (!llvm::StringRef(opts.plan.loss).contains(':')) {
    smp::SmpBuildGradientsPassOptions gradients;
    gradients.loss = opts.plan.loss;
    gradients.dp = 2;
    pm.addPass(smp::createSmpBuildGradientsPass(gradients));
  }
  if (succeeded(pm.run(**copy)))
    return "";
  return why.empty() ? "the training step cannot be built over a split batch"
                     : why;
}

/// A flag only data parallelism reads, given to a compile whose planner
/// chose none: refused, as with pinned degrees, where it would have gone
/// unused without a word.
std::optional<int> checkPlannedDataParallelism(const Options &opts,
                                               const smp::Plan &chosen) {
  if (chosen.dp > 1)
    return std::nullopt;
  std::string flag = opts.given.count("--bucket-mb")  ? "--bucket-mb"
                     : opts.plan.bnStats == "replica" ? "--bn-stats replica"
                                                      : "";
  if (flag.empty())
    return std::nullopt;
  return fail("the planner chose " + chosen.summary() +
              ", without data parallelism, so " + flag +
              " would change nothing: pin --dp N (and --tp/--pp so that dp x "
              "tp x pp = --devices) or leave " +
              flag + " out");
}

/// smpc compile --devices N: the planner's choice for `opts` (planned within
/// `fraction` of the device's memory when given, else the planner's default;
/// without data parallelism or micro-batches when `noSplit` says why)
/// applied to it; an exit code when there is none.
std::optional<int> applyPlannerChoice(MLIRContext &ctx, Options &opts,
                                      std::optional<double> fraction,
                                      const std::string &noSplit) {
  // Plan on the model at one sample per batch, then compile that plan.
  Options perSample = opts;
  perSample.import.batchSize = 1;
  // The compile below imports the model again and prints its warnings.
  std::optional<ScopedDiagnosticHandler> quietWarnings;
  quietWarnings.emplace(&ctx, [](Diagnostic &d) {
    return success(d.getSeverity() == DiagnosticSeverity::Warning);
  });
  auto model = loadModule(ctx, perSample);
  quietWarnings.reset();
  if (failed(model))
    return 1;
  PlanCommand cmd = planRequest(opts);
  cmd.memoryFraction = fraction;
  if (!noSplit.empty()) {
    cmd.dp = 1;
    cmd.microbatchSize = opts.globalBatch;
  }
  smpc::planBatchNormMicrobatches(**model, opts, cmd, /*note=*/!fraction);
  // --checkpoint-activations auto asks for recomputation, not offloading
  // (unless --offload-activations asks for that too).
  if (!opts.pinned.offload && opts.pinned.recompute == "auto")
    cmd.offload = false;
  auto chosen =
      choosePlanForCompile(**model, cmd, opts.autoPlanJson, opts.autoPlanSvg);
  if (!chosen)
    return 1;
  auto device = smp::loadDeviceSpec(opts.cluster);
  if (!device)
    return fail(llvm::toString(device.takeError()));
  Options::PlannedMemory &pm = opts.plannedMemory.emplace();
  pm.deviceBytes = device->memoryBytes;
  pm.limitBytes = device->memoryBytes * smp::PlanRequest().memoryFraction;
  pm.estimateBytes = chosen->peakMemory;
  pm.summary = chosen->summary();
  opts.plan.dp = chosen->dp, opts.pinned.dp = chosen->dp;
  opts.plan.tp = chosen->tp, opts.pinned.tp = chosen->tp;
  opts.plan.pp = chosen->pp, opts.pinned.pp = chosen->pp;
  opts.pinned.microbatches = chosen->microbatches;
  opts.plan.schedule = chosen->schedule;
  opts.plan.virtualStages = chosen->virtualStages;
  if (opts.ppCuts.empty())
    opts.ppCuts = plannedCuts(*chosen); // the stages the plan priced
  applyPlannedMemory(*chosen, opts.plan, opts.pinned.recompute != "full");
  llvm::outs() << "planned for " << opts.devices << " x " << opts.cluster
               << ": " << chosen->summary() << "\n";
  if (auto code = checkPlannedDataParallelism(opts, *chosen))
    return code;
  if (auto code = finishParallelOptions(opts))
    return *code;
  return std::nullopt;
}

/// smpc compile --devices N: plans, compiles, and checks each rank's
/// compiled arena against the planner's limit before writing. A plan whose
/// arena is over it (the planner's estimate was low) is planned again within
/// less of the device, by the ratio found, up to --max-plans plans: the
/// artifact never needs more memory than the plan said it fits in.
int compileAutoPlanned(MLIRContext &ctx, const Options &given) {
  // A model whose batch cannot be split is planned without data parallelism
  // or micro-batches (unless they are pinned: the compile then says why
  // not). Asked once, not at every plan.
  std::string noSplit;
  if (!given.pinned.dp && !given.pinned.microbatches && !given.microbatchSize)
    noSplit = whyBatchCannotSplit(ctx, given);
  if (!noSplit.empty())
    llvm::errs() << "smpc: note: " << given.input
                 << ": planning without data parallelism or micro-batches: "
                 << noSplit << "\n";
  std::optional<double> fraction;
  for (int attempt = 1;; ++attempt) {
    Options opts = given;
    if (auto code = applyPlannerChoice(ctx, opts, fraction, noSplit))
      return *code;
    auto module = loadModule(ctx, opts);
    if (failed(module))
      return 1;
    uint64_t largest = 0;
    int rc = compile(**module, opts, &largest);
    if (rc == kOverPlannedMemory) {
      const Options::PlannedMemory &pm = *opts.plannedMemory;
      if (attempt >= given.maxPlans)
        return fail(llvm::formatv(
            "{0}: after {1} plan{2} the compiled step is still over the "
            "planner's limit of {3:F0} bytes a device ({4}): give more "
            "--devices or a smaller --batch-size, allow more plans "
            "(--max-plans), or pin a plan that fits (smpc plan prints the "
            "chosen plan's compiled arena)",
            opts.input, given.maxPlans, given.maxPlans == 1 ? "" : "s",
            pm.limitBytes, opts.cluster));
      fraction = 0.99 * fraction.value_or(smp::PlanRequest().memoryFraction) *
                 pm.estimateBytes / static_cast<double>(largest);
      llvm::errs() << llvm::formatv(
          "smpc: note: planning again within {0:P1} of the device\n",
          *fraction);
      continue;
    }
    if (rc == 0 && !opts.emitMlir) {
      // The planner's picture beside the artifact (its JSON report is in
      // plan.json, which the writer writes for every compile).
      std::string err;
      auto svg = openOutputFile(opts.output + "/plan.svg", &err);
      if (!svg)
        return fail(opts.output + "/plan.svg: " + err);
      svg->os() << opts.autoPlanSvg;
      svg->keep();
    }
    return rc;
  }
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  Options opts;
  if (auto code = parseArgs(argc, argv, opts))
    return *code;
  if (auto code = applyExportSidecar(opts))
    return *code;
  if (opts.command == "ops") {
    for (const auto &op : smp::onnx_frontend::supportedOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  DialectRegistry registry;
  smp::registerAllDialects(registry);
  smp::registerAllPasses();
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // Errors and warnings as one line each (Diagnostics.h).
  OneLineDiagnostics diagnostics(&ctx);
  if (opts.autoPlan)
    return compileAutoPlanned(ctx, opts);
  auto module = loadModule(ctx, opts);
  if (failed(module))
    return 1;
  if (opts.command == "compile")
    return compile(**module, opts);
  if (opts.command == "plan") {
    PlanCommand plan = planRequest(opts);
    smpc::planBatchNormMicrobatches(**module, opts, plan, /*note=*/true);
    plan.jsonOutput = opts.jsonOutput;
    plan.svgOutput = opts.svgOutput;
    // The chosen plan's memory from the compiler's own memory plan, when the
    // model can be imported at the plan's micro-batch size and is small
    // enough to build its step in a moment.
    auto exact = [&](const smp::Plan &p) -> std::optional<CompiledPlan> {
      if (opts.noExactMemory)
        return std::nullopt;
      size_t ops = 0;
      (**module).walk([&](Operation *) { ++ops; });
      if (ops * p.microbatches * p.virtualStages > 20000)
        return std::nullopt; // a large model: the estimate only
      Options c = opts;
      c.command = "compile";
      c.train = true;
      c.import.training = true;
      c.emitMlir = true;
      if (c.plan.loss.empty())
        c.plan.loss = "cross_entropy:logits:labels";
      c.plan.optimizer = opts.plan.optimizer;
      c.plan.dp = p.dp, c.plan.tp = p.tp, c.plan.pp = p.pp;
      c.pinned.dp = p.dp, c.pinned.tp = p.tp, c.pinned.pp = p.pp;
      c.devices = p.dp * p.tp * p.pp;
      c.pinned.microbatches = p.microbatches;
      c.plan.schedule = p.schedule;
      c.plan.virtualStages = p.virtualStages;
      if (c.ppCuts.empty())
        c.ppCuts = plannedCuts(p);
      c.import.batchSize = opts.globalBatch;
      applyPlannedMemory(p, c.plan);
      llvm::StringRef in = opts.input;
      if (in.ends_with(".mlir") && p.microbatchSize != 1)
        return std::nullopt; // generated at one sample per batch
      if (finishParallelOptions(c))
        return std::nullopt;
      ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
      auto m = loadModule(ctx, c);
      if (failed(m))
        return std::nullopt;
      smp::DeviceGrid grid;
      (**m)->setAttr(smp::SmpDialect::kPlacementAttr,
                     StringAttr::get(&ctx, grid.placementLetters()));
      // As compile() builds it: stored 16-bit parameters as stored.
      if (smpc::storedPrecision(**m, c.plan.freeze).any16Bit())
        c.plan.precision = "fp32";
      if (failed(buildTrainStep(**m, c, c.plan)))
        return std::nullopt;
      auto bytes = smp::planArenaBytes(**m);
      if (!bytes) {
        llvm::consumeError(bytes.takeError());
        return std::nullopt;
      }
      CompiledPlan built{*bytes, 0};
      if (auto device = smp::loadDeviceSpec(opts.cluster))
        built.stepSeconds =
            compiledStepTime(**m, /*training=*/true, *device).seconds;
      else
        llvm::consumeError(device.takeError());
      return built;
    };
    return runPlan(**module, plan, exact);
  }
  std::string err;
  auto out = openOutputFile(opts.output, &err);
  if (!out)
    return fail(opts.output + ": " + err);
  if (opts.command == "summary")
    smp::printModelSummary(**module, out->os());
  else
    (*module)->print(out->os());
  out->keep();
  return 0;
}
