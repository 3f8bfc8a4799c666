//===- Options.cpp - smpc's command line: usage, flags, their checks ------===//

#include "Options.h"
#include "ConfigFile.h"
#include "DeepSpeedConfig.h"
#include "Help.h"
#include "TrainingArgs.h"

#include "smp/Schedule/PipelineSchedule.h"
#include "smp/Target/Artifact/DeviceGrid.h"
#include "smp/Version.h"
#include "smp/base/EvalMetrics.h"
#include "smp/base/LrSchedules.h"
#include "smp/base/Suggest.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>



int fail(const llvm::Twine &msg) {
  llvm::errs() << "smpc: error: " << msg << "\n";
  return 1;
}

namespace {

/// " (did you mean 'X'?)" for the closest of `known` within a third of the
/// word's length (at most 3 edits), or "".
std::string didYouMean(llvm::StringRef word,
                       const std::vector<std::string> &known) {
  unsigned limit = std::min<unsigned>(3, std::max<unsigned>(1, word.size() / 3));
  std::string best;
  unsigned bestDistance = limit + 1;
  for (const std::string &k : known) {
    unsigned d = word.edit_distance(k, /*AllowReplacements=*/true, limit);
    if (d < bestDistance) {
      best = k;
      bestDistance = d;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}


/// Flags that take a non-empty text: where it goes, and what it should be.
struct TextFlag {
  const char *name;
  std::string Options::*field;
  const char *expects;
};
const TextFlag kTextFlags[] = {
    {"--cluster", &Options::cluster, "a preset name or a JSON file"},
    {"--profile-db", &Options::profileDb,
     "smprun --profile files (comma-separated)"},
    {"--report", &Options::svgOutput, "an .svg file name"},
    {"--json", &Options::jsonOutput, "a file name"},
    {"--pp-cuts", &Options::ppCuts, "node names separated by commas"},
};

using FlagValue =
    llvm::function_ref<std::optional<std::string>(llvm::StringRef)>;

bool failFlag(std::optional<int> &exit, const llvm::Twine &msg) {
  exit = fail(msg);
  return true;
}

/// The output, the model and its import: -o, --dim, --tie, --untie,
/// --target, --batch-size, --train, --nesterov, --eval-on-start,
/// --shift-labels,
/// --zero-stage and --[no-]shard-optimizer-state.
/// Returns whether `a` is one of them; `exit` is set when its value is
/// malformed.
bool parseModelFlag(llvm::StringRef a, const FlagValue &value, Options &opts,
                    std::optional<int> &exit) {
  if (a == "-o" || a.starts_with("-o=")) {
    auto v = value("-o");
    if (!v)
      return failFlag(exit, "-o needs a file name");
    opts.output = *v;
  } else if (a == "--dim" || a.starts_with("--dim=")) {
    auto v = value("--dim");
    if (!v)
      return failFlag(exit, "--dim needs NAME=VALUE");
    auto [name, num] = llvm::StringRef(*v).split('=');
    int64_t n;
    if (name.empty() || num.getAsInteger(10, n) || n <= 0)
      return failFlag(
          exit,
          "--dim expects NAME=VALUE with a positive integer, got '" + *v + "'");
    if (auto it = opts.import.dims.find(name); it != opts.import.dims.end())
      return failFlag(exit, "--dim " + name + " is given twice (" +
                                std::to_string(it->second) + " and " + num +
                                "); give it once");
    opts.import.dims[name] = n;
  } else if (a == "--tie" || a.starts_with("--tie=") || a == "--untie" ||
             a.starts_with("--untie=") || a == "--no-padding-row" ||
             a.starts_with("--no-padding-row=") || a == "--trainable" ||
             a.starts_with("--trainable=")) {
    std::string flag = a.split('=').first.str();
    auto v = value(flag);
    if (!v || v->empty())
      return failFlag(exit, flag + " needs an initializer name");
    (flag == "--tie"         ? opts.import.tie
     : flag == "--untie"     ? opts.import.untie
     : flag == "--trainable" ? opts.import.trainable
                             : opts.import.noPaddingRows)
        .push_back(*v);
  } else if (a == "--target" || a.starts_with("--target=")) {
    auto v = value("--target");
    if (!v || (*v != "cpu" && *v != "cuda"))
      return failFlag(exit, "--target expects cpu or cuda");
    opts.target = *v;
  } else if (a == "--batch-size" || a.starts_with("--batch-size=")) {
    auto v = value("--batch-size");
    int64_t n;
    if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n <= 0)
      return failFlag(exit, "--batch-size expects a positive integer");
    opts.import.batchSize = n;
  } else if (a == "--train") {
    opts.train = true;
    opts.import.training = true;
  } else if (a == "--nesterov") {
    opts.plan.nesterov = true;
  } else if (a == "--eval-on-start") {
    opts.evalOnStart = true;
  } else if (a == "--shift-labels") {
    opts.shiftLabels = true;
  } else if (a == "--eval-accuracy") {
    opts.plan.evalAccuracy = true;
  } else if (a == "--eval-predictions") {
    opts.plan.evalPredictions = true;
  } else if (a == "--eval-logits") {
    opts.plan.evalLogits = true;
  } else if (a == "--hf-no-decay") {
    opts.hfNoDecay = true;
  } else if (a == "--shard-optimizer-state" ||
             a == "--no-shard-optimizer-state" || a == "--zero-stage" ||
             a.starts_with("--zero-stage=")) {
    int stage = a == "--shard-optimizer-state" ? 1 : 0;
    std::string shown = a.str();
    if (a.starts_with("--zero-stage")) {
      auto v = value("--zero-stage");
      if (!v || llvm::StringRef(*v).getAsInteger(10, stage) || stage < 0 ||
          stage > 3)
        return failFlag(exit, "--zero-stage expects 0, 1, 2 or 3");
      shown = "--zero-stage " + std::to_string(stage);
    }
    if (opts.pinned.zeroStage && *opts.pinned.zeroStage != stage)
      return failFlag(exit, opts.pinned.zeroFlag + " and " + shown +
                                " contradict each other (--shard-optimizer-"
                                "state is --zero-stage 1, --no-shard-"
                                "optimizer-state --zero-stage 0); give one");
    opts.pinned.zeroStage = stage;
    opts.pinned.zeroFlag = shown;
    opts.plan.zeroStage = stage;
  } else {
    return false;
  }
  return true;
}

/// --eval-metrics LIST: smp/base/EvalMetrics.h's names, each once;
/// `accuracy` is --eval-accuracy.
bool parseEvalMetrics(llvm::StringRef list, Options &opts,
                      std::optional<int> &exit) {
  llvm::SmallVector<llvm::StringRef> names;
  list.split(names, ',');
  std::vector<std::string> known(std::begin(smp::base::kEvalMetrics),
                                 std::end(smp::base::kEvalMetrics));
  for (llvm::StringRef n : names) {
    std::string name = n.trim().str();
    if (!smp::base::isEvalMetric(name))
      return failFlag(exit, "--eval-metrics: unknown metric '" + name + "'" +
                                smp::base::didYouMean(name, known) +
                                "; expected " + smp::base::evalMetricList());
    if (name == "accuracy")
      opts.plan.evalAccuracy = true;
    else if (!llvm::is_contained(opts.plan.evalMetrics, name))
      opts.plan.evalMetrics.push_back(name);
  }
  return true;
}

/// The training step: loss, optimizer, schedule, precision,
/// recomputation, offloading, global batch, --optimize, --schedule,
/// --bn-stats. Returns whether `a` is one of them; `exit` is set when its
/// value is malformed.
bool parseTrainingFlag(llvm::StringRef a, const FlagValue &value, Options &opts,
                       std::optional<int> &exit) {
  if (a == "--loss" || a == "--optimizer" || a == "--lr-schedule" ||
      a == "--freeze" || a == "--no-decay" || a.starts_with("--loss=") ||
      a.starts_with("--optimizer=") || a.starts_with("--lr-schedule=") ||
      a.starts_with("--freeze=") || a.starts_with("--no-decay=")) {
    std::string flag = a.split('=').first.str();
    auto v = value(flag);
    if (!v || v->empty())
      return failFlag(exit, flag + " needs a value");
    if (flag == "--loss")
      opts.plan.loss = *v;
    else if (flag == "--freeze")
      opts.plan.freeze = opts.import.freeze = *v;
    else if (flag == "--no-decay")
      opts.plan.noDecay = *v; // checked by smp-optimizer, as --freeze is
    else if (flag == "--optimizer") {
      if (*v != "sgd" && *v != "adam" && *v != "adamw")
        return failFlag(exit, "--optimizer expects sgd, adam or adamw, got '" +
                                  *v + "'");
      opts.plan.optimizer = *v;
    } else {
      if (!smp::base::isLrSchedule(*v))
        return failFlag(exit, std::string("--lr-schedule expects ") +
                                  smp::base::lrScheduleList() + ", got '" + *v +
                                  "'");
      opts.lrSchedule = *v;
    }
  } else if (a == "--eval-metrics" || a.starts_with("--eval-metrics=")) {
    auto v = value("--eval-metrics");
    if (!v || v->empty())
      return failFlag(exit, "--eval-metrics needs a value: a comma-separated "
                            "list of " +
                                smp::base::evalMetricList());
    return parseEvalMetrics(*v, opts, exit);
  } else if (a == "--warmup-type" || a.starts_with("--warmup-type=")) {
    auto v = value("--warmup-type");
    if (!v || (*v != "log" && *v != "linear"))
      return failFlag(exit, "--warmup-type expects log or linear");
    opts.warmupType = *v;
  } else if (a == "--precision" || a.starts_with("--precision=")) {
    auto v = value("--precision");
    if (!v || (*v != "fp32" && *v != "bf16" && *v != "fp16"))
      return failFlag(exit, "--precision expects fp32, bf16 or fp16");
    opts.plan.precision = *v;
  } else if (a == "--master-weights" || a.starts_with("--master-weights=")) {
    auto v = value("--master-weights");
    if (!v || *v != "fp32")
      return failFlag(exit, "--master-weights expects fp32 (the master "
                            "copies of parameters stored in bf16 or fp16)");
    opts.plan.masterWeights = true;
  } else if (a == "--checkpoint-activations" ||
             a.starts_with("--checkpoint-activations=")) {
    auto v = value("--checkpoint-activations");
    if (!v ||
        (*v != "none" && *v != "full" && *v != "selective" && *v != "auto"))
      return failFlag(exit,
                      "--checkpoint-activations expects none, full, selective "
                      "or auto");
    if (*v != "none" && *v != "auto")
      opts.plan.recompute = *v;
    opts.pinned.recompute = *v;
  } else if (a == "--offload-activations") {
    opts.plan.offload = true;
    opts.pinned.offload = true;
  } else if (a == "--activation-loading-horizon" ||
             a.starts_with("--activation-loading-horizon=")) {
    auto v = value("--activation-loading-horizon");
    int64_t n;
    if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n < 1)
      return failFlag(
          exit, "--activation-loading-horizon expects a positive integer");
    opts.plan.offloadHorizon = n;
  } else if (a == "--no-memory-plan") {
    opts.noExactMemory = true;
  } else if (a == "--global-batch" || a.starts_with("--global-batch=") ||
             a == "--microbatch-size" || a.starts_with("--microbatch-size=") ||
             a == "--max-plans" || a.starts_with("--max-plans=")) {
    std::string flag = a.split('=').first.str();
    auto v = value(flag);
    int64_t n;
    if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n < 1)
      return failFlag(exit, flag + " expects a positive integer");
    (flag == "--global-batch"      ? opts.globalBatch
     : flag == "--microbatch-size" ? opts.microbatchSize
                                   : opts.maxPlans) = n;
  } else if (a == "--optimize" || a.starts_with("--optimize=")) {
    auto v = value("--optimize");
    if (!v || (*v != "speed" && *v != "memory"))
      return failFlag(exit,
                      "--optimize expects speed (the fastest plan that fits) "
                      "or memory (the plan that needs the least memory)");
    opts.optimize = *v;
  } else if (a == "--schedule" || a.starts_with("--schedule=")) {
    auto v = value("--schedule");
    if (!v || !smp::schedule::parseScheduleKind(*v))
      return failFlag(exit,
                      "--schedule expects gpipe, 1f1b, interleaved or zb-h1");
    opts.plan.schedule =
        smp::schedule::scheduleKindName(*smp::schedule::parseScheduleKind(*v));
    opts.pinned.schedule = opts.plan.schedule;
  } else if (a == "--bn-stats" || a.starts_with("--bn-stats=")) {
    auto v = value("--bn-stats");
    if (!v || (*v != "global" && *v != "replica" && *v != "running"))
      return failFlag(exit,
                      "--bn-stats expects global (batch statistics over every "
                      "data-parallel replica: SyncBatchNorm), replica (each "
                      "replica's own: DDP's BatchNorm) or running (the running "
                      "statistics, kept: frozen BatchNorm)");
    opts.plan.bnStats = *v;
  } else if (a == "--seed" || a.starts_with("--seed=")) {
    auto v = value("--seed");
    if (!v || llvm::StringRef(*v).getAsInteger(10, opts.seed))
      return failFlag(exit, "--seed expects a non-negative integer, got '" +
                                (v ? *v : std::string()) + "'");
  } else {
    return false;
  }
  return true;
}

/// --decay-steps N, --eval-every N|epoch (-1), --eval-batch-size N.
bool parseStepsFlag(const std::string &flag, const FlagValue &value,
                    Options &opts, std::optional<int> &exit) {
  int64_t &n = flag == "--eval-every"        ? opts.evalEvery
               : flag == "--eval-batch-size" ? opts.evalBatch
                                             : opts.decaySteps;
  auto v = value(flag);
  if (flag == "--eval-every" && v && *v == "epoch")
    n = -1; // every epoch of smprun's --data
  else if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n < 1)
    return failFlag(exit, flag + " expects a positive integer" +
                              (flag == "--eval-every" ? " or epoch" : ""));
  return true;
}

/// Placement, degrees, numbers (lr, betas, ...) and output modes. Returns
/// whether `a` is one of them; `exit` is set when its value is malformed.
bool parseParallelFlag(llvm::StringRef a, const FlagValue &value, Options &opts,
                       std::optional<int> &exit) {
  if (a == "--placement" || a.starts_with("--placement=")) {
    auto v = value("--placement");
    if (!v || !smp::DeviceGrid::parsePlacement(*v))
      return failFlag(exit,
                      "--placement expects cluster, spread or an order of the "
                      "letters D, P and T (e.g. DTP)");
    opts.placement = *v;
  } else if (a == "--dp" || a == "--devices" || a == "--tp" || a == "--pp" ||
             a == "--microbatches" || a == "--virtual-stages" ||
             a.starts_with("--dp=") || a.starts_with("--devices=") ||
             a.starts_with("--tp=") || a.starts_with("--pp=") ||
             a.starts_with("--microbatches=") ||
             a.starts_with("--virtual-stages=")) {
    std::string flag = a.split('=').first.str();
    auto v = value(flag);
    int64_t n;
    if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n < 1)
      return failFlag(exit, flag + " expects a positive integer");
    if (flag == "--dp")
      opts.plan.dp = n, opts.pinned.dp = n;
    else if (flag == "--pp")
      opts.plan.pp = n, opts.pinned.pp = n;
    else if (flag == "--tp")
      opts.plan.tp = n, opts.pinned.tp = n;
    else if (flag == "--microbatches")
      opts.pinned.microbatches = n;
    else if (flag == "--virtual-stages")
      opts.plan.virtualStages = n;
    else if (flag == "--devices")
      opts.devices = n;
  } else if (a == "--decay-steps" || a.starts_with("--decay-steps=") ||
             a == "--eval-every" || a.starts_with("--eval-every=") ||
             a == "--eval-batch-size" || a.starts_with("--eval-batch-size=")) {
    return parseStepsFlag(a.split('=').first.str(), value, opts, exit);
  } else if (a == "--loss-scale-window" ||
             a.starts_with("--loss-scale-window=") ||
             a == "--loss-scale-hysteresis" ||
             a.starts_with("--loss-scale-hysteresis=")) {
    std::string flag = a.split('=').first.str();
    auto v = value(flag);
    int64_t n;
    if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n < 1)
      return failFlag(exit, flag + " expects a positive integer, got '" +
                                (v ? *v : std::string()) + "'");
    (flag == "--loss-scale-window" ? opts.plan.growthInterval
                                   : opts.plan.hysteresis) = n;
  } else if (a == "--consecutive-hysteresis") {
    opts.plan.consecutiveHysteresis = true;
  } else if (a == "--loss-scaler" || a.starts_with("--loss-scaler=")) {
    auto v = value("--loss-scaler");
    if (!v || (*v != "torch" && *v != "deepspeed"))
      return failFlag(exit, "--loss-scaler expects torch or deepspeed");
    opts.plan.deepspeedWindow = *v == "deepspeed";
  } else if (a == "--warmup-steps" || a.starts_with("--warmup-steps=")) {
    auto v = value("--warmup-steps");
    if (!v || llvm::StringRef(*v).getAsInteger(10, opts.warmupSteps) ||
        opts.warmupSteps < 0)
      return failFlag(exit, "--warmup-steps expects a non-negative integer");
  } else if (a == "--lr" || a == "--momentum" || a == "--dampening" ||
             a == "--weight-decay" || a == "--beta1" || a == "--beta2" ||
             a == "--eps" || a == "--clip-grad-norm" || a == "--loss-scale" ||
             a == "--bucket-mb" || a.starts_with("--bucket-mb=") ||
             a.starts_with("--lr=") || a.starts_with("--momentum=") ||
             a.starts_with("--dampening=") ||
             a.starts_with("--weight-decay=") || a.starts_with("--beta1=") ||
             a.starts_with("--beta2=") || a.starts_with("--eps=") ||
             a.starts_with("--clip-grad-norm=") ||
             a.starts_with("--loss-scale=") || a == "--min-loss-scale" ||
             a.starts_with("--min-loss-scale=") || a == "--warmup-min-lr" ||
             a.starts_with("--warmup-min-lr=") || a == "--warmup-min-ratio" ||
             a.starts_with("--warmup-min-ratio=") || a == "--cos-min-ratio" ||
             a.starts_with("--cos-min-ratio=") || a == "--eval-delay" ||
             a.starts_with("--eval-delay=")) {
    std::string flag = a.split('=').first.str();
    auto v = value(flag);
    double x;
    if (!v || llvm::StringRef(*v).getAsDouble(x) || !std::isfinite(x) || x < 0)
      return failFlag(exit, flag +
                                " expects a finite non-negative number, got '" +
                                (v ? *v : std::string()) + "'");
    opts.numbers[flag.substr(2)] = x;
    float f = static_cast<float>(x);
    smp::TrainingPipelineOptions &p = opts.plan;
    if (flag == "--lr")
      opts.lr = x;
    else if (flag == "--loss-scale")
      p.initScale = f;
    else if (flag == "--min-loss-scale")
      p.minScale = x;
    else if (flag == "--warmup-min-lr" || flag == "--warmup-min-ratio")
      opts.warmupMin = x;
    else if (flag == "--cos-min-ratio")
      opts.cosMinRatio = x;
    else if (flag == "--eval-delay")
      opts.evalDelay = x;
    else if (flag == "--momentum")
      p.momentum = f;
    else if (flag == "--dampening")
      p.dampening = f;
    else if (flag == "--weight-decay")
      p.weightDecay = f;
    else if (flag == "--beta1")
      p.beta1 = f;
    else if (flag == "--beta2")
      p.beta2 = f;
    else if (flag == "--eps")
      p.epsilon = f;
    else if (flag == "--clip-grad-norm")
      p.clipGradNorm = f;
    else
      p.bucketMb = f;
  } else if (a == "--gather-prefetch" || a.starts_with("--gather-prefetch=")) {
    auto v = value("--gather-prefetch");
    if (!v || llvm::StringRef(*v).getAsInteger(10, opts.plan.prefetch) ||
        opts.plan.prefetch < 0)
      return failFlag(exit,
                      "--gather-prefetch expects a non-negative integer");
  } else if (a == "--sharded-dp" || a.starts_with("--sharded-dp=")) {
    auto v = value("--sharded-dp");
    int64_t n;
    if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n < 1)
      return failFlag(exit, "--sharded-dp expects a positive integer (the "
                            "data-parallel ranks of one shard group)");
    opts.pinned.shardedDp = n;
  } else if (a.starts_with("--emit") && a != "--emit=mlir") {
    return failFlag(exit, "--emit supports only --emit=mlir");
  } else if (a == "--sequence-parallel" || a == "--no-sequence-parallel") {
    bool on = a == "--sequence-parallel";
    if (opts.pinned.sequenceParallel && *opts.pinned.sequenceParallel != on)
      return failFlag(exit, "--sequence-parallel and --no-sequence-parallel "
                            "contradict each other; give one");
    opts.pinned.sequenceParallel = on;
    opts.plan.sequenceParallel = on;
  } else {
    return false;
  }
  return true;
}

/// The switches without a value (the output, the importer's rewrites, the
/// clean-up fusions). Returns whether `a` is one of them.
bool parseSwitch(llvm::StringRef a, Options &opts) {
  if (a == "--emit=mlir")
    opts.emitMlir = true;
  else if (a == "--mlir-print-ir-after-all")
    opts.printAfterAll = true;
  else if (a == "--no-raise")
    opts.import.raise = false;
  else if (a == "--no-pad-vocab")
    opts.plan.padClasses = false;
  else if (a == "--no-gelu-epilogue")
    opts.plan.fuseGeluEpilogue = false;
  else if (a == "--dgelu-epilogue")
    opts.plan.fuseGeluGradEpilogue = true;
  else if (a == "--no-bias-grad-epilogue")
    opts.plan.fuseBiasGrad = false;
  else if (a == "--no-residual-epilogue")
    opts.plan.fuseResidual = false;
  else if (a == "--no-fuse-loss-grad")
    opts.plan.fuseLossGrad = false;
  else if (a == "--no-fuse-attention")
    opts.import.fuseAttention = false;
  else if (a == "--no-dropout")
    opts.import.noDropout = true;
  else if (a == "--without-export-metadata")
    opts.import.withoutExportMetadata = true;
  else
    return false;
  return true;
}

/// What the flags mean together: the command and its input, the plan
/// command's needs, the planner's choice, the parallel degrees.
std::optional<int> finishArgs(Options &opts) {
  if (opts.command != "import" && opts.command != "summary" &&
      opts.command != "ops" && opts.command != "compile" &&
      opts.command != "plan")
    return fail("unknown command '" + opts.command + "'" +
                didYouMean(opts.command, smpcCommands()) +
                " (expected compile, plan, import, summary or ops; see smpc "
                "--help)");
  if (opts.command != "ops" && opts.input.empty())
    return fail(opts.command + " needs a MODEL file");
  opts.import.parameterWarnings = opts.command == "summary";
  if (auto code = checkFlagCombinations(opts))
    return code;
  if (opts.command == "plan") {
    if (opts.devices < 1)
      return fail("plan needs --devices N");
    if (opts.cluster.empty())
      return fail("plan needs --cluster (a preset or a JSON file)");
    if (opts.globalBatch == 0)
      opts.globalBatch = opts.import.batchSize > 0 ? opts.import.batchSize : 1;
    opts.import.batchSize = 1; // profiled per sample
    return std::nullopt;
  }
  if (opts.command == "compile" && opts.output == "-" && !opts.emitMlir)
    return fail("compile needs -o OUT.smpx (the artifact directory)");
  // Devices without any pinned degree: the planner chooses (in main).
  if (opts.command == "compile" && opts.train && plannerChooses(opts)) {
    if (opts.import.batchSize <= 0)
      return fail("--devices without --dp/--tp/--pp needs a global "
                  "--batch-size for the planner");
    opts.autoPlan = true;
    opts.globalBatch = opts.import.batchSize;
    if (opts.cluster.empty())
      opts.cluster = opts.target == "cuda" ? "h100-sxm-80g" : "cpu";
    return std::nullopt;
  }
  if (auto code = finishParallelOptions(opts))
    return code;
  return checkDegreeFlags(opts);
}

} // namespace

int64_t gatherPrefetchOf(const Options &opts) {
  if (opts.given.count("--gather-prefetch"))
    return opts.plan.prefetch;
  return opts.target == "cuda" ? smp::kDefaultGatherPrefetch : 0;
}

std::optional<int> parseArgs(int argc, char **argv, Options &opts) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    llvm::errs() << smpcUsage();
    return 1;
  }
  if (llvm::Error e = expandConfigFile(args))
    return fail(llvm::toString(std::move(e)));
  std::vector<std::string> warnings;
  bool trainerArgs = llvm::any_of(args, [](llvm::StringRef a) {
    return a == "--training-args" || a.starts_with("--training-args=");
  });
  if (llvm::Error e = expandTrainingArgs(args, warnings))
    return fail(llvm::toString(std::move(e)));
  if (llvm::Error e = expandDeepSpeedConfig(
          args, warnings,
          trainerArgs ? "on the command line (or in --config or "
                        "--training-args)"
                      : "on the command line (or in --config)"))
    return fail(llvm::toString(std::move(e)));
  for (const std::string &w : warnings)
    llvm::errs() << "smpc: warning: " << w << "\n";
  opts.argv = args;
  // A flag's value, by flag: one given twice with another value is refused
  // (the last would silently win). --dim, --tie, --untie,
  // --no-padding-row and --trainable repeat.
  std::map<std::string, std::string> valueOf;
  std::string twice;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!twice.empty())
      return fail(twice);
    llvm::StringRef a = args[i];
    if (a.starts_with("--"))
      opts.given.insert(a.split('=').first.str());
    auto value = [&](llvm::StringRef flag) -> std::optional<std::string> {
      std::optional<std::string> v;
      if (a.starts_with(flag.str() + "="))
        v = a.drop_front(flag.size() + 1).str();
      else if (i + 1 < args.size())
        v = args[++i];
      if (v && flag != "--dim" && flag != "--tie" && flag != "--untie" &&
          flag != "--no-padding-row" && flag != "--trainable") {
        auto [it, fresh] = valueOf.emplace(flag.str(), *v);
        if (!fresh && it->second != *v && twice.empty())
          twice = flag.str() + " is given twice, as '" + it->second +
                  "' and as '" + *v + "'; give it once";
      }
      return v;
    };
    if (a == "-h" || a == "--help") {
      // smpc COMMAND --help (or smpc --help COMMAND): the command's help.
      for (const std::string &w : args)
        if (auto help = commandHelp(w)) {
          llvm::outs() << *help;
          return 0;
        }
      llvm::outs() << smpcUsage();
      return 0;
    }
    if (a == "--version") {
      llvm::outs() << "smpc " << SMP_VERSION << " (LLVM/MLIR "
                   << LLVM_VERSION_STRING << ")\n";
      return 0;
    }
    auto text = llvm::find_if(kTextFlags, [&](const TextFlag &f) {
      return a == f.name || a.starts_with(std::string(f.name) + "=");
    });
    if (text != std::end(kTextFlags)) {
      auto v = value(text->name);
      if (!v || v->empty())
        return fail(std::string(text->name) + " expects " + text->expects);
      opts.*(text->field) = *v;
      continue;
    }
    std::optional<int> exit;
    if (parseModelFlag(a, value, opts, exit) ||
        parseTrainingFlag(a, value, opts, exit) ||
        parseParallelFlag(a, value, opts, exit) || parseSwitch(a, opts)) {
      if (exit)
        return exit;
      continue;
    }
    if (a.starts_with("-") && a != "-") {
      return fail("unknown option '" + a + "'" +
                  didYouMean(a.split('=').first, smpcFlags()) + " (see smpc " +
                  (opts.command.empty() ? "" : opts.command + " ") + "--help)");
    } else if (opts.command.empty()) {
      opts.command = a.str();
    } else if (opts.input.empty()) {
      opts.input = a.str();
    } else {
      return fail("unexpected argument '" + a + "'");
    }
  }
  if (!twice.empty())
    return fail(twice);
  return finishArgs(opts);
}

/// Hybrid sharding (--sharded-dp S, config sharded_data_parallel_degree):
/// ZeRO over groups of S of the dp ranks. Without --zero-stage it is
/// SageMaker's sharded data parallelism, ZeRO-3.
static std::optional<int> finishShardedDp(Options &opts) {
  if (!opts.pinned.shardedDp)
    return std::nullopt;
  int64_t s = *opts.pinned.shardedDp, dp = opts.plan.dp;
  std::string flag = "--sharded-dp " + std::to_string(s);
  if (opts.pinned.zeroStage == 0)
    return fail(flag + " shards the ZeRO state over groups of " +
                std::to_string(s) + " ranks, but " + opts.pinned.zeroFlag +
                " shards nothing; give --zero-stage 1, 2 or 3 with it, or "
                "drop it");
  if (s == 1)
    return fail(flag + " makes groups of one rank, which shard nothing; "
                "give a degree of 2 or more that divides --dp " +
                std::to_string(dp) + ", or drop --sharded-dp");
  if (dp % s != 0)
    return fail(flag + " does not divide the " + std::to_string(dp) +
                " data-parallel ranks (--dp " + std::to_string(dp) +
                "); give a degree that divides it, or --dp a multiple of " +
                std::to_string(s));
  if (!opts.pinned.zeroStage)
    opts.plan.zeroStage = 3;
  opts.plan.shardedDp = s;
  return std::nullopt;
}

/// Checks and derives the parallel degrees and each rank's batch.
std::optional<int> finishParallelOptions(Options &opts) {
  // An unset data-parallel degree takes the devices the others leave.
  if (!opts.pinned.dp && opts.devices > 0) {
    if (opts.devices % (opts.plan.tp * opts.plan.pp) != 0)
      return fail("--devices " + std::to_string(opts.devices) +
                  " is not a multiple of tp x pp = " +
                  std::to_string(opts.plan.tp * opts.plan.pp));
    opts.plan.dp = opts.devices / (opts.plan.tp * opts.plan.pp);
  }
  int64_t product = opts.plan.dp * opts.plan.tp * opts.plan.pp;
  if (opts.devices == 0)
    opts.devices = product;
  if (opts.devices != product)
    return fail("--devices " + std::to_string(opts.devices) +
                " does not equal dp x tp x pp = " + std::to_string(opts.plan.dp) +
                " x " + std::to_string(opts.plan.tp) + " x " +
                std::to_string(opts.plan.pp) + " = " + std::to_string(product));
  if (auto err = finishShardedDp(opts))
    return err;
  if (opts.given.count("--gather-prefetch") && opts.plan.zeroStage != 3)
    return fail("--gather-prefetch applies to --zero-stage 3 (the "
                "parameters' all-gathers)");
  opts.plan.prefetch = gatherPrefetchOf(opts);
  if (opts.plan.zeroStage > 0 && opts.plan.dp == 1)
    return fail(opts.pinned.zeroFlag + " needs --dp > 1 (ZeRO shards over "
                "the data-parallel ranks)");
  if (opts.plan.virtualStages > 1 && opts.plan.schedule != "interleaved")
    return fail("--virtual-stages needs --schedule interleaved");
  if (opts.plan.schedule == "interleaved" && opts.plan.pp == 1 && opts.plan.virtualStages > 1)
    return fail("--virtual-stages needs --pp > 1");
  if (!opts.ppCuts.empty() && opts.plan.pp * opts.plan.virtualStages == 1)
    return fail("--pp-cuts needs --pp > 1");
  opts.plan.microbatches = opts.pinned.microbatches.value_or(opts.plan.pp);
  // Under tensor parallelism a cross-entropy's logits are split by
  // vocabulary; fp16 trains with dynamic loss scaling.
  opts.plan.vocabParallel =
      smp::TrainingPipelineOptions::crossEntropyLogits(opts.plan.loss);
  opts.plan.lossScaling = opts.plan.precision == "fp16";
  opts.plan.cuts.clear();
  if (!opts.ppCuts.empty())
    for (llvm::StringRef cut : llvm::split(opts.ppCuts, ','))
      opts.plan.cuts.push_back(cut.str());
  bool parallel = opts.plan.dp > 1 || opts.plan.pp > 1 || opts.plan.tp > 1 ||
                  opts.plan.microbatches > 1;
  // The batch as stated: the importer checks every other source (a --dim of
  // the batch dim, a batch fixed in the file) against it.
  opts.import.globalBatch = opts.import.batchSize;
  opts.import.batchSplit = opts.plan.dp * opts.plan.microbatches;
  if (parallel) {
    if (!opts.train)
      return fail("--dp, --tp, --pp and --microbatches apply to training "
                  "(compile --train)");
    int64_t split = opts.plan.dp * opts.plan.microbatches;
    if (opts.import.batchSize <= 0 && split > 1)
      return fail("--dp " + std::to_string(opts.plan.dp) + " x " +
                  std::to_string(opts.plan.microbatches) +
                  " micro-batches split the batch: give the global batch "
                  "as --batch-size");
    if (opts.import.batchSize > 0 && opts.import.batchSize % split != 0)
      return fail("--batch-size " + std::to_string(opts.import.batchSize) +
                  " cannot be split over dp " + std::to_string(opts.plan.dp) +
                  (opts.plan.microbatches > 1
                       ? " x " + std::to_string(opts.plan.microbatches) +
                             " micro-batches"
                       : std::string()) +
                  " (give a global --batch-size divisible by " +
                  std::to_string(split) + ")");
    // Each rank's share, and within it one micro-batch.
    opts.import.batchSize /= split;
  }
  if (opts.train && opts.command != "compile" && opts.command != "summary")
    return fail("--train applies to compile (and to summary)");
  if (opts.train && opts.command == "compile" && opts.plan.loss.empty())
    return fail("--train needs --loss (NAME, cross_entropy:LOGITS:LABELS or "
                "mse:OUTPUT:TARGET)");
  if (opts.shiftLabels && opts.train &&
      !llvm::StringRef(opts.plan.loss).starts_with("cross_entropy:"))
    return fail("--shift-labels shifts the labels of smpc's "
                "cross_entropy:LOGITS:LABELS loss; --loss " +
                opts.plan.loss +
                (opts.plan.loss.find(':') == std::string::npos
                     ? " is the model's own, which shifts its labels itself "
                       "where it does (a transformers causal LM does): leave "
                       "--shift-labels out"
                     : " has no labels to shift: leave --shift-labels out"));
  if (!opts.train && (!opts.plan.loss.empty() ||
                     opts.plan.precision != "fp32"))
    return fail("training options need --train");
  return std::nullopt;
}
