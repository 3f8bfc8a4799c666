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

#include "ModelSummary.h"
#include "PlanCommand.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "smp/Frontend/ONNX/Importer.h"
#include "smp/Analysis/Cost/CostModel.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Schedule/PipelineSchedule.h"
#include "smp/Target/Artifact/ArtifactWriter.h"
#include "smp/Target/Artifact/DeviceGrid.h"
#include "smp/InitAll.h"
#include "smp/Version.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace mlir;

namespace {

const char *kUsage = R"(smpc - the smp compiler: imports a model, builds its training step and
splits it over devices.

USAGE
  smpc compile MODEL -o OUT.smpx [--target cpu|cuda] [--batch-size B]
               [--dim NAME=VALUE]... [--train --loss LOSS [OPTIMIZER...]]
  smpc import  MODEL [-o OUT.mlir] [--dim NAME=VALUE]... [--no-raise]
  smpc summary MODEL [--dim NAME=VALUE]...
  smpc plan    MODEL --devices N --cluster NAME|FILE.json [--global-batch B]
               [--dp D] [--tp T] [--pp P] [--microbatch-size M] [--json FILE]
               [--report FILE.svg]
  smpc ops
  smpc --help | --version

COMMANDS
  compile   Build the artifact smprun runs: a directory OUT.smpx holding the
            manifest, per-rank programs and weights, the final IR
            (model.mlir) and the plan report (plan.txt). Forward only
            unless --train is given.
  import    Convert MODEL into smp dialect MLIR (to stdout, or to -o FILE).
  summary   Print inputs, outputs, parameter count and an op histogram.
  plan      Choose how to train MODEL on N devices of a cluster: dp x tp x
            pp, micro-batches, schedule, ZeRO-1 and recomputation, by the
            cost and memory models; print the plan, its predicted step
            time, throughput and memory per device, and the runners-up.
            Pinned flags (--tp 8, --schedule 1f1b, --shard-optimizer-state)
            fix a dimension; the rest is searched. --cluster is a preset
            (h100-sxm-80g, a100-sxm-80g, a100-sxm-40g, v100-32g, cpu) or a
            JSON file (docs/architecture.md). The model is read at one sample
            per batch (its batch dim is bound to 1).
  ops       List the ONNX ops the importer supports.

MODEL
  An ONNX model (.onnx; external data is read from the model's directory),
  ONNX text syntax (.onnxtxt), or smp dialect MLIR text (.mlir).

OPTIONS
  -o FILE              Output file (default: stdout); for compile, the
                       artifact directory (required).
  --target cpu|cuda    Backend the artifact is built for (default: cpu).
  --batch-size B       Bind the leading symbolic dim of every input to B
                       (explicit --dim bindings win).
  --dim NAME=VALUE     Bind the symbolic dim NAME (ONNX dim_param) to VALUE.
                       smp compiles static shapes: every symbolic dim of the
                       model's inputs must be bound. Repeatable.
  --no-raise           Keep decomposed layer-norm/GELU chains as imported.
  --emit=mlir          compile: print the final IR (after the training and
                       parallelization passes) instead of writing an artifact.
  --mlir-print-ir-after-all
                       compile: print the IR after every pass (to stderr).

TRAINING (compile --train)
  --loss LOSS          NAME (a scalar output of the model),
                       cross_entropy:LOGITS:LABELS (mean cross-entropy of
                       output LOGITS [..., V] against a new int64 input
                       LABELS; label -100 is ignored, as in PyTorch) or
                       mse:OUTPUT:TARGET (a new input TARGET).
  --optimizer sgd|adam|adamw   (default sgd; PyTorch semantics and defaults)
  --lr X               Peak learning rate (default 0.001).
  --lr-schedule constant|cosine  Cosine decays to 0 over the run's steps.
  --warmup-steps K     Linear warmup from 0 over the first K steps.
  --momentum X --dampening X --nesterov      SGD options.
  --weight-decay X     Default 0 (sgd, adam) or 0.01 (adamw).
  --beta1 X --beta2 X --eps X                Adam/AdamW options.
  --clip-grad-norm X   Clip gradients to global L2 norm X.
  --freeze REGEX       Parameters whose name matches get no gradient.
  --precision fp32|bf16|fp16
                       Compute in bfloat16 or float16 with fp32 master
                       weights, optimizer state, loss and reductions
                       (default fp32). fp16 adds dynamic loss scaling
                       (torch.amp.GradScaler's defaults): steps whose
                       gradients overflow are skipped and the scale halves.
  --loss-scale X       fp16: the initial loss scale (default 65536).

PARALLELISM (compile --train)
  --devices N          Number of ranks (default dp x tp x pp; without --dp,
                       dp = N / (tp x pp)).
  --dp D               Data parallel over D ranks: each rank trains on
                       --batch-size / D samples of every global batch and
                       the gradients are summed across ranks, so the step
                       equals the one-device step. Run with smprun -n D.
  --checkpoint-activations none|full|selective|auto
                       Recompute activations in the backward instead of
                       keeping them: full keeps only the residual stream
                       between half-layers, selective recomputes the
                       attention cores (scores, mask, softmax), auto lets
                       the planner recompute the stages that need it
                       (--devices N; pinned degrees stay pinned).
  --profile-db F,...   smprun --profile files: the compiled plan's step time is
                       predicted from these measured op times (the roofline
                       of --cluster where they have none) and printed.
  --offload-activations
                       Copy the activations the backward needs (after
                       recomputation, its checkpoints) to host memory after
                       their forward use and back before the backward.
  --activation-loading-horizon K
                       Prefetch offloaded activations K ahead (default 1).
  --bucket-mb X        Data parallel: all-reduce gradients in buckets of up
                       to X MiB (default 25), each right after the backward
                       computes its last gradient; 0: one per gradient.
  --shard-optimizer-state
                       ZeRO-1 (with --dp): gradients are reduce-scattered,
                       each rank keeps and updates 1/D of the optimizer
                       state and parameters, and parameters are all-gathered.
  --no-shard-optimizer-state
                       Planner (plan, compile --devices N): never ZeRO-1.
  --pp P               Pipeline parallel over P ranks: the model is cut into
                       P stages (balanced by predicted cost, or at
                       --pp-cuts), each step runs --microbatches micro-
                       batches through them in --schedule's order.
  --pp-cuts A,B,...    The ONNX node names at which stages 1, 2, ... start.
  --microbatches M     Micro-batches per step (default: pp; with pp 1,
                       gradient accumulation). --batch-size / dp must be
                       divisible by M.
  --schedule S         gpipe, 1f1b (default), interleaved or zb-h1.
  --virtual-stages V   Model chunks per pipeline rank (interleaved only).
  --placement X        How the dp x pp x tp grid maps to ranks: cluster (DPT,
                       the default: a rank's pipeline and tensor peers are
                       adjacent), spread (TPD) or any order of D, P, T (the
                       right-most axis gets adjacent ranks).
  --tp T               Tensor parallel over T ranks: Megatron-style, the MLP
                       (column- then row-parallel) and attention (heads)
                       layers are split (T must divide the heads and the
                       hidden units), and the embedding, the LM head and
                       a cross-entropy loss by vocabulary (any T).
  -h, --help           Show this help.
  --version            Show the version.

EXAMPLES
  smpc compile gpt.onnx --batch-size 8 --dim seq=1024 -o gpt.smpx
  smpc compile mlp.onnx --train --loss cross_entropy:logits:labels \
       --optimizer adamw --lr 1e-3 --batch-size 8 -o mlp.smpx
  smpc import gpt.onnx --dim batch=8 --dim seq=1024 -o gpt.mlir
  smpc summary gpt.mlir
)";

struct Options {
  std::string command;
  std::string input;
  std::string output = "-";
  std::string target = "cpu";
  bool train = false;
  std::string loss, optimizer = "sgd", lrSchedule = "constant", freeze;
  std::string precision = "fp32";
  int64_t dp = 1, devices = 0, pp = 1, tp = 1, microbatches = 0, virtualStages = 1;
  std::string schedule = "1f1b", placement = "cluster", ppCuts;
  bool dpGiven = false, tpGiven = false, ppGiven = false, scheduleGiven = false,
       noZero = false; // --no-shard-optimizer-state (planner: pinned off)
  /// smpc plan (and compile --devices N without pinned degrees).
  std::string cluster, jsonOutput, svgOutput, profileDb;
  bool autoPlan = false, noExactMemory = false;
  std::string recomputeGiven; // --checkpoint-activations, for the planner
  bool offloadGiven = false;  // --offload-activations
  std::string autoPlanJson, autoPlanSvg;
  int64_t globalBatch = 0, microbatchSize = 0;
  bool zero = false;
  bool emitMlir = false, printAfterAll = false;
  double lr = 1e-3;
  int64_t warmupSteps = 0;
  /// Pass options of smp-build-train-step given on the command line.
  std::vector<std::string> trainOptions;
  smp::onnx_frontend::ImportOptions import;
};

int fail(const llvm::Twine &msg) {
  llvm::errs() << "smpc: error: " << msg << "\n";
  return 1;
}

std::optional<int> finishParallelOptions(Options &opts);

/// Parses argv; returns an exit code when the program should stop.
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

std::optional<int> parseArgs(int argc, char **argv, Options &opts) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    llvm::errs() << kUsage;
    return 1;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    auto value = [&](llvm::StringRef flag) -> std::optional<std::string> {
      if (a.starts_with(flag.str() + "="))
        return a.drop_front(flag.size() + 1).str();
      if (i + 1 < args.size())
        return args[++i];
      return std::nullopt;
    };
    if (a == "-h" || a == "--help") {
      llvm::outs() << kUsage;
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
    if (a == "-o" || a.starts_with("-o=")) {
      auto v = value("-o");
      if (!v)
        return fail("-o needs a file name");
      opts.output = *v;
    } else if (a == "--dim" || a.starts_with("--dim=")) {
      auto v = value("--dim");
      if (!v)
        return fail("--dim needs NAME=VALUE");
      auto [name, num] = llvm::StringRef(*v).split('=');
      int64_t n;
      if (name.empty() || num.getAsInteger(10, n) || n <= 0)
        return fail("--dim expects NAME=VALUE with a positive integer, got '" +
                    *v + "'");
      opts.import.dims[name] = n;
    } else if (a == "--target" || a.starts_with("--target=")) {
      auto v = value("--target");
      if (!v || (*v != "cpu" && *v != "cuda"))
        return fail("--target expects cpu or cuda");
      opts.target = *v;
    } else if (a == "--batch-size" || a.starts_with("--batch-size=")) {
      auto v = value("--batch-size");
      int64_t n;
      if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n <= 0)
        return fail("--batch-size expects a positive integer");
      opts.import.batchSize = n;
    } else if (a == "--train") {
      opts.train = true;
    } else if (a == "--nesterov") {
      opts.trainOptions.push_back("nesterov=true");
    } else if (a == "--shard-optimizer-state" ||
               a == "--no-shard-optimizer-state") {
      (a == "--shard-optimizer-state" ? opts.zero : opts.noZero) = true;
      if (opts.zero && opts.noZero)
        return fail("--shard-optimizer-state and --no-shard-optimizer-state "
                    "contradict each other");
      if (opts.zero && a == "--shard-optimizer-state")
        opts.trainOptions.push_back("shard-optimizer-state=true");
    } else if (a == "--loss" || a == "--optimizer" || a == "--lr-schedule" ||
               a == "--freeze" || a.starts_with("--loss=") ||
               a.starts_with("--optimizer=") ||
               a.starts_with("--lr-schedule=") || a.starts_with("--freeze=")) {
      std::string flag = a.split('=').first.str();
      auto v = value(flag);
      if (!v || v->empty())
        return fail(flag + " needs a value");
      if (flag == "--loss")
        opts.loss = *v;
      else if (flag == "--freeze")
        opts.freeze = *v;
      else if (flag == "--optimizer") {
        if (*v != "sgd" && *v != "adam" && *v != "adamw")
          return fail("--optimizer expects sgd, adam or adamw, got '" + *v +
                      "'");
        opts.optimizer = *v;
      } else {
        if (*v != "constant" && *v != "cosine")
          return fail("--lr-schedule expects constant or cosine");
        opts.lrSchedule = *v;
      }
    } else if (a == "--precision" || a.starts_with("--precision=")) {
      auto v = value("--precision");
      if (!v || (*v != "fp32" && *v != "bf16" && *v != "fp16"))
        return fail("--precision expects fp32, bf16 or fp16");
      opts.precision = *v;
    } else if (a == "--checkpoint-activations" ||
               a.starts_with("--checkpoint-activations=")) {
      auto v = value("--checkpoint-activations");
      if (!v || (*v != "none" && *v != "full" && *v != "selective" &&
                 *v != "auto"))
        return fail("--checkpoint-activations expects none, full, selective "
                    "or auto");
      if (*v != "none" && *v != "auto")
        opts.trainOptions.push_back("recompute=" + *v);
      opts.recomputeGiven = *v;
    } else if (a == "--offload-activations") {
      opts.trainOptions.push_back("offload=true");
      opts.offloadGiven = true;
    } else if (a == "--activation-loading-horizon" ||
               a.starts_with("--activation-loading-horizon=")) {
      auto v = value("--activation-loading-horizon");
      int64_t n;
      if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n < 1)
        return fail("--activation-loading-horizon expects a positive integer");
      opts.trainOptions.push_back("offload-horizon=" + *v);
    } else if (a == "--no-memory-plan") {
      opts.noExactMemory = true;
    } else if (a == "--global-batch" || a.starts_with("--global-batch=") ||
               a == "--microbatch-size" ||
               a.starts_with("--microbatch-size=")) {
      std::string flag = a.split('=').first.str();
      auto v = value(flag);
      int64_t n;
      if (!v || llvm::StringRef(*v).getAsInteger(10, n) || n < 1)
        return fail(flag + " expects a positive integer");
      (flag == "--global-batch" ? opts.globalBatch : opts.microbatchSize) = n;
    } else if (a == "--schedule" || a.starts_with("--schedule=")) {
      opts.scheduleGiven = true;
      auto v = value("--schedule");
      if (!v || !smp::schedule::parseScheduleKind(*v))
        return fail("--schedule expects gpipe, 1f1b, interleaved or zb-h1");
      opts.schedule = smp::schedule::scheduleKindName(
          *smp::schedule::parseScheduleKind(*v));
    } else if (a == "--placement" || a.starts_with("--placement=")) {
      auto v = value("--placement");
      if (!v || !smp::DeviceGrid::parsePlacement(*v))
        return fail("--placement expects cluster, spread or an order of the "
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
        return fail(flag + " expects a positive integer");
      if (flag == "--dp")
        opts.dp = n, opts.dpGiven = true;
      else if (flag == "--pp")
        opts.pp = n, opts.ppGiven = true;
      else if (flag == "--tp")
        opts.tp = n, opts.tpGiven = true;
      else if (flag == "--microbatches")
        opts.microbatches = n;
      else if (flag == "--virtual-stages")
        opts.virtualStages = n;
      else if (flag == "--devices")
        opts.devices = n;
    } else if (a == "--warmup-steps" || a.starts_with("--warmup-steps=")) {
      auto v = value("--warmup-steps");
      if (!v || llvm::StringRef(*v).getAsInteger(10, opts.warmupSteps) ||
          opts.warmupSteps < 0)
        return fail("--warmup-steps expects a non-negative integer");
    } else if (a == "--lr" || a == "--momentum" || a == "--dampening" ||
               a == "--weight-decay" || a == "--beta1" || a == "--beta2" ||
               a == "--eps" || a == "--clip-grad-norm" || a == "--loss-scale" ||
               a == "--bucket-mb" || a.starts_with("--bucket-mb=") ||
               a.starts_with("--lr=") || a.starts_with("--momentum=") ||
               a.starts_with("--dampening=") ||
               a.starts_with("--weight-decay=") || a.starts_with("--beta1=") ||
               a.starts_with("--beta2=") || a.starts_with("--eps=") ||
               a.starts_with("--clip-grad-norm=") ||
               a.starts_with("--loss-scale=")) {
      std::string flag = a.split('=').first.str();
      auto v = value(flag);
      double x;
      if (!v || llvm::StringRef(*v).getAsDouble(x) || x < 0)
        return fail(flag + " expects a non-negative number");
      if (flag == "--lr")
        opts.lr = x;
      else if (flag == "--loss-scale")
        opts.trainOptions.push_back("init-scale=" + *v);
      else
        opts.trainOptions.push_back(flag.substr(2) + "=" + *v);
    } else if (a == "--emit=mlir") {
      opts.emitMlir = true;
    } else if (a == "--mlir-print-ir-after-all") {
      opts.printAfterAll = true;
    } else if (a.starts_with("--emit")) {
      return fail("--emit supports only --emit=mlir");
    } else if (a == "--no-raise") {
      opts.import.raise = false;
    } else if (a.starts_with("-") && a != "-") {
      return fail("unknown option '" + a + "' (see smpc --help)");
    } else if (opts.command.empty()) {
      opts.command = a.str();
    } else if (opts.input.empty()) {
      opts.input = a.str();
    } else {
      return fail("unexpected argument '" + a + "'");
    }
  }
  if (opts.command != "import" && opts.command != "summary" &&
      opts.command != "ops" && opts.command != "compile" &&
      opts.command != "plan")
    return fail("unknown command '" + opts.command + "' (see smpc --help)");
  if (opts.command != "ops" && opts.input.empty())
    return fail(opts.command + " needs a MODEL file");
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
  if (opts.command == "compile" && opts.train && opts.devices > 1 &&
      ((!opts.dpGiven && !opts.tpGiven && !opts.ppGiven &&
        opts.microbatches == 0) ||
       opts.recomputeGiven == "auto")) {
    if (opts.import.batchSize <= 0)
      return fail("--devices without --dp/--tp/--pp needs a global "
                  "--batch-size for the planner");
    opts.autoPlan = true;
    opts.globalBatch = opts.import.batchSize;
    if (opts.cluster.empty())
      opts.cluster = opts.target == "cuda" ? "h100-sxm-80g" : "cpu";
    return std::nullopt;
  }
  return finishParallelOptions(opts);
}

/// Checks and derives the parallel degrees and each rank's batch.
std::optional<int> finishParallelOptions(Options &opts) {
  // An unset data-parallel degree takes the devices the others leave.
  if (!opts.dpGiven && opts.devices > 0) {
    if (opts.devices % (opts.tp * opts.pp) != 0)
      return fail("--devices " + std::to_string(opts.devices) +
                  " is not a multiple of tp x pp = " +
                  std::to_string(opts.tp * opts.pp));
    opts.dp = opts.devices / (opts.tp * opts.pp);
  }
  int64_t product = opts.dp * opts.tp * opts.pp;
  if (opts.devices == 0)
    opts.devices = product;
  if (opts.devices != product)
    return fail("--devices " + std::to_string(opts.devices) +
                " does not equal dp x tp x pp = " + std::to_string(opts.dp) +
                " x " + std::to_string(opts.tp) + " x " +
                std::to_string(opts.pp) + " = " + std::to_string(product));
  if (opts.zero && opts.dp == 1)
    return fail("--shard-optimizer-state needs --dp > 1");
  if (opts.virtualStages > 1 && opts.schedule != "interleaved")
    return fail("--virtual-stages needs --schedule interleaved");
  if (opts.schedule == "interleaved" && opts.pp == 1 && opts.virtualStages > 1)
    return fail("--virtual-stages needs --pp > 1");
  if (!opts.ppCuts.empty() && opts.pp * opts.virtualStages == 1)
    return fail("--pp-cuts needs --pp > 1");
  if (opts.microbatches == 0)
    opts.microbatches = opts.pp;
  bool parallel = opts.dp > 1 || opts.pp > 1 || opts.tp > 1 ||
                  opts.microbatches > 1;
  if (parallel) {
    if (!opts.train)
      return fail("--dp, --tp, --pp and --microbatches apply to training "
                  "(compile --train)");
    int64_t split = opts.dp * opts.microbatches;
    if (opts.import.batchSize <= 0 || opts.import.batchSize % split != 0)
      return fail("--batch-size " + std::to_string(opts.import.batchSize) +
                  " cannot be split over dp " + std::to_string(opts.dp) +
                  (opts.microbatches > 1
                       ? " x " + std::to_string(opts.microbatches) +
                             " micro-batches"
                       : std::string()) +
                  " (give a global --batch-size divisible by " +
                  std::to_string(split) + ")");
    // Each rank's share, and within it one micro-batch.
    opts.import.batchSize /= split;
  }
  if (opts.train && opts.command != "compile")
    return fail("--train applies to compile");
  if (opts.train && opts.loss.empty())
    return fail("--train needs --loss (NAME, cross_entropy:LOGITS:LABELS or "
                "mse:OUTPUT:TARGET)");
  if (!opts.train && (!opts.loss.empty() || !opts.trainOptions.empty() ||
                     opts.precision != "fp32"))
    return fail("training options need --train");
  return std::nullopt;
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
    SourceMgrDiagnosticHandler handler(sm, &ctx);
    OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sm, &ctx);
    if (!module) {
      fail(path + ": invalid smp MLIR (see the diagnostic above)");
      return failure();
    }
    return module;
  }
  auto module = smp::onnx_frontend::importONNXFile(ctx, path, opts.import);
  if (!module) {
    fail(llvm::toString(module.takeError()));
    return failure();
  }
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

/// What the command line pins for the planner (smpc plan, and smpc compile
/// --devices N without pinned degrees); the rest is searched.
PlanCommand planRequest(const Options &opts) {
  PlanCommand cmd;
  cmd.devices = opts.devices;
  cmd.cluster = opts.cluster;
  cmd.globalBatch = opts.globalBatch;
  cmd.loss = opts.loss;
  cmd.optimizer = opts.optimizer;
  cmd.precision = opts.precision;
  if (opts.dpGiven)
    cmd.dp = opts.dp;
  if (opts.tpGiven)
    cmd.tp = opts.tp;
  if (opts.ppGiven)
    cmd.pp = opts.pp;
  if (opts.microbatchSize)
    cmd.microbatchSize = opts.microbatchSize;
  if (opts.scheduleGiven)
    cmd.schedule = opts.schedule;
  if (opts.virtualStages > 1)
    cmd.virtualStages = opts.virtualStages;
  if (opts.zero || opts.noZero)
    cmd.zero = opts.zero;
  if (opts.recomputeGiven == "none" || opts.recomputeGiven == "full")
    cmd.recompute = opts.recomputeGiven == "full";
  if (opts.offloadGiven)
    cmd.offload = true;
  return cmd;
}

/// Builds @train_step with smp-build-train-step, then cleans up.
LogicalResult buildTrainStep(ModuleOp module, const Options &opts) {
  std::string pipeline;
  if (opts.tp > 1) {
    // A cross-entropy's logits may be split by vocabulary.
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(opts.loss).split(parts, ':');
    pipeline = "smp-tensor-parallel{tp=" + std::to_string(opts.tp);
    if (parts.size() == 3 && parts[0] == "cross_entropy")
      pipeline += " vocab-parallel=" + parts[1].str();
    pipeline += "},";
  }
  if (opts.precision != "fp32")
    pipeline += "func.func(smp-mixed-precision{precision=" + opts.precision +
                "}),";
  pipeline += "smp-build-train-step{loss=" +
                         opts.loss + " optimizer=" + opts.optimizer;
  if (!opts.freeze.empty())
    pipeline += " freeze=" + opts.freeze;
  for (const auto &o : opts.trainOptions)
    pipeline += " " + o;
  if (opts.precision == "fp16")
    pipeline += " loss-scaling=true";
  if (opts.dp > 1)
    pipeline += " dp=" + std::to_string(opts.dp);
  if (opts.microbatches > 1)
    pipeline += " microbatches=" + std::to_string(opts.microbatches);
  pipeline += "}";
  if (opts.pp > 1 || opts.microbatches > 1) {
    std::string split = "smp-pipeline-split{stages=" +
                        std::to_string(opts.pp * opts.virtualStages);
    if (!opts.ppCuts.empty())
      split += " cuts=" + opts.ppCuts;
    pipeline = pipeline.substr(0, pipeline.find("smp-build-train-step")) +
               split + "}," +
               pipeline.substr(pipeline.find("smp-build-train-step"));
    pipeline += ",smp-pipeline-schedule{pp=" + std::to_string(opts.pp) +
                " schedule=" + opts.schedule + "}";
  }
  pipeline += ",canonicalize,cse";
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  if (opts.printAfterAll) {
    module.getContext()->disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true,
                        /*printAfterOnlyOnChange=*/false);
  }
  if (failed(parsePassPipeline(pipeline, pm))) {
    fail("cannot build the training pipeline '" + pipeline + "'");
    return failure();
  }
  if (failed(pm.run(module))) {
    fail(opts.input + ": cannot build the training step (see above)");
    return failure();
  }
  return success();
}

int compile(ModuleOp module, const Options &opts) {
  auto weights = openWeights(module, opts);
  if (!weights)
    return fail(llvm::toString(weights.takeError()));
  smp::ArtifactOptions artifact;
  if (opts.train) {
    smp::DeviceGrid grid;
    grid.order = *smp::DeviceGrid::parsePlacement(opts.placement);
    module->setAttr(smp::SmpDialect::kPlacementAttr,
                    StringAttr::get(module.getContext(),
                                    grid.placementLetters()));
    if (failed(buildTrainStep(module, opts)))
      return 1;
    smp::TrainingOptions t;
    t.loss = opts.loss;
    t.optimizer = opts.optimizer;
    t.lr = opts.lr;
    t.lrSchedule = opts.lrSchedule;
    t.warmupSteps = opts.warmupSteps;
    if (auto source = module->getAttrOfType<StringAttr>("smp.source")) {
      llvm::SmallString<256> abs(source.getValue());
      llvm::sys::fs::make_absolute(abs);
      t.sourceModel = abs.str().str();
    }
    artifact.training = t;
  }
  // The step time on this plan's ranks, measured op times (--profile-db)
  // preferred over the roofline of the target's device.
  std::string prediction;
  if (!opts.profileDb.empty()) {
    smp::ProfileDB db;
    llvm::SmallVector<llvm::StringRef> files;
    llvm::StringRef(opts.profileDb).split(files, ',');
    for (llvm::StringRef f : files)
      if (auto err = db.addFile(f))
        return fail(llvm::toString(std::move(err)));
    auto device = smp::loadDeviceSpec(
        opts.cluster.empty() ? (opts.target == "cuda" ? "h100-sxm-80g" : "cpu")
                             : opts.cluster);
    if (!device)
      return fail(llvm::toString(device.takeError()));
    double slowest = 0;
    size_t measured = 0, modelled = 0, waits = 0;
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.getSymName() == "main")
        continue;
      smp::StepEstimate e = smp::estimateFunction(f, *device, &db);
      slowest = std::max(slowest, e.totalSeconds());
      measured += e.measuredOps;
      modelled += e.modelledOps;
      waits += e.measuredReceives;
    }
    // A pipeline's ranks also wait: its bubble, as the schedule simulator
    // gives it for equal stages (unless the profile measured this plan's
    // receives, waits included).
    double bubble = 0;
    if (opts.pp > 1 && waits == 0)
      if (auto kind = smp::schedule::parseScheduleKind(opts.schedule))
        bubble = std::max(0.0, smp::schedule::unitCostBubbleFraction(
                                   *kind, static_cast<int>(opts.pp),
                                   static_cast<int>(opts.microbatches),
                                   static_cast<int>(opts.virtualStages)));
    slowest /= 1 - bubble;
    char buf[256];
    snprintf(buf, sizeof(buf),
             "predicted step time: %.4g s (slowest rank%s; %zu ops measured "
             "in the profile, %zu modelled)\n",
             slowest, bubble > 0 ? ", with the pipeline's bubble" : "",
             measured, modelled);
    prediction = buf;
    llvm::outs() << prediction;
  }
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

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  Options opts;
  if (auto code = parseArgs(argc, argv, opts))
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
  // Warnings (the context prints only errors by itself).
  ScopedDiagnosticHandler warnings(&ctx, [](Diagnostic &d) {
    if (d.getSeverity() != DiagnosticSeverity::Warning)
      return failure(); // errors: the default handler
    llvm::errs() << "smpc: warning: " << d.str() << "\n";
    return success();
  });
  if (opts.autoPlan) {
    // Plan on the model at one sample per batch, then compile that plan.
    Options perSample = opts;
    perSample.import.batchSize = 1;
    auto model = loadModule(ctx, perSample);
    if (failed(model))
      return 1;
    PlanCommand cmd = planRequest(opts);
    // --checkpoint-activations auto asks for recomputation, not offloading
    // (unless --offload-activations asks for that too).
    if (!opts.offloadGiven && opts.recomputeGiven == "auto")
      cmd.offload = false;
    auto chosen = choosePlanForCompile(**model, cmd, opts.autoPlanJson,
                                       opts.autoPlanSvg);
    if (!chosen)
      return 1;
    opts.dp = chosen->dp, opts.dpGiven = true;
    opts.tp = chosen->tp, opts.tpGiven = true;
    opts.pp = chosen->pp, opts.ppGiven = true;
    opts.microbatches = chosen->microbatches;
    opts.schedule = chosen->schedule;
    opts.virtualStages = chosen->virtualStages;
    if (opts.ppCuts.empty())
      opts.ppCuts = plannedCuts(*chosen); // the stages the plan priced
    if (chosen->zero && !opts.zero) {
      opts.zero = true;
      opts.trainOptions.push_back("shard-optimizer-state=true");
    }
    if (chosen->offload && !opts.offloadGiven)
      opts.trainOptions.push_back("offload=true");
    if (chosen->recompute && opts.recomputeGiven != "full") {
      opts.trainOptions.push_back("recompute=full");
      std::string stages;
      for (size_t k = 0; k < chosen->stageRecompute.size(); ++k)
        if (chosen->stageRecompute[k])
          stages += (stages.empty() ? "" : ",") + std::to_string(k);
      if (!llvm::all_of(chosen->stageRecompute, [](bool r) { return r; }))
        opts.trainOptions.push_back("recompute-stages=" + stages);
    }
    llvm::outs() << "planned for " << opts.devices << " x " << opts.cluster
                 << ": " << chosen->summary() << "\n";
    if (auto code = finishParallelOptions(opts))
      return *code;
  }
  auto module = loadModule(ctx, opts);
  if (failed(module))
    return 1;
  if (opts.command == "compile") {
    int rc = compile(**module, opts);
    if (rc == 0 && !opts.autoPlanJson.empty() && !opts.emitMlir) {
      // The planner's report beside the artifact.
      std::string err;
      auto out = openOutputFile(opts.output + "/plan.json", &err);
      if (!out)
        return fail(opts.output + "/plan.json: " + err);
      out->os() << opts.autoPlanJson;
      out->keep();
      auto svg = openOutputFile(opts.output + "/plan.svg", &err);
      if (!svg)
        return fail(opts.output + "/plan.svg: " + err);
      svg->os() << opts.autoPlanSvg;
      svg->keep();
    }
    return rc;
  }
  if (opts.command == "plan") {
    PlanCommand plan = planRequest(opts);
    plan.jsonOutput = opts.jsonOutput;
    plan.svgOutput = opts.svgOutput;
    // The chosen plan's memory from the compiler's own memory plan, when the
    // model can be imported at the plan's micro-batch size and is small
    // enough to build its step in a moment.
    auto exact = [&](const smp::Plan &p) -> std::optional<std::vector<uint64_t>> {
      if (opts.noExactMemory)
        return std::nullopt;
      size_t ops = 0;
      (**module).walk([&](Operation *) { ++ops; });
      if (ops * p.microbatches * p.virtualStages > 20000)
        return std::nullopt; // a large model: the estimate only
      Options c = opts;
      c.command = "compile";
      c.train = true;
      c.emitMlir = true;
      if (c.loss.empty())
        c.loss = "cross_entropy:logits:labels";
      c.optimizer = opts.optimizer;
      c.dp = p.dp, c.tp = p.tp, c.pp = p.pp;
      c.dpGiven = c.tpGiven = c.ppGiven = true;
      c.devices = p.dp * p.tp * p.pp;
      c.microbatches = p.microbatches;
      c.schedule = p.schedule;
      c.virtualStages = p.virtualStages;
      if (c.ppCuts.empty())
        c.ppCuts = plannedCuts(p);
      c.import.batchSize = opts.globalBatch;
      if (p.zero && !opts.zero) {
        c.zero = true;
        c.trainOptions.push_back("shard-optimizer-state=true");
      }
      if (p.offload && !opts.offloadGiven)
        c.trainOptions.push_back("offload=true");
      if (p.recompute) {
        c.trainOptions.push_back("recompute=full");
        std::string stages;
        for (size_t k = 0; k < p.stageRecompute.size(); ++k)
          if (p.stageRecompute[k])
            stages += (stages.empty() ? "" : ",") + std::to_string(k);
        if (!llvm::all_of(p.stageRecompute, [](bool r) { return r; }))
          c.trainOptions.push_back("recompute-stages=" + stages);
      }
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
      if (failed(buildTrainStep(**m, c)))
        return std::nullopt;
      auto bytes = smp::planArenaBytes(**m);
      if (!bytes) {
        llvm::consumeError(bytes.takeError());
        return std::nullopt;
      }
      return *bytes;
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
