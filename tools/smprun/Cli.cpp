//===- Cli.cpp - smprun's command line ------------------------------------===//
//
// The flags of smprun: --help, parsing, and the checks that involve several
// flags (a contradiction is refused with what to pass instead).
//
//===----------------------------------------------------------------------===//

#include "Cli.h"

#include "smp/base/Files.h"
#include "smp/base/Suggest.h"
#include "smp/kernels/cpu/Kernels.h"

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <set>

namespace smprun {
namespace {

const char *kUsage = R"(smprun - runs a model compiled by smpc.

USAGE
  smprun MODEL.smpx --data DIR --output-dir DIR [--threads N]
  smprun MODEL.smpx --data DIR --steps N [--metrics FILE] [--threads N]
  smprun -n N MODEL.smpx ...         N ranks on this machine (through mpirun)
  mpirun -n N smprun MODEL.smpx ...  (or mpiexec, srun --mpi=pmix) under a
                                     launcher (docs/launchers.md)
  smprun --help | --version

OPTIONS
  --data DIR         One .npy file per graph input, named after the input
                     (DIR/<input>.npy); dtype and shape must be exactly the
                     compiled ones (see MODEL.smpx/plan.txt), except that
                     float32 data for a bf16 or fp16 input is rounded to
                     nearest even as it is fed (numpy has no bf16), and
                     training converts integer samples of another integer
                     dtype (uint16 token ids for an int64 input) when every
                     value fits, and maps the files instead of reading
                     them (a corpus larger than memory trains: batches
                     page it in). In file names
                     '/', '\\', '%' and control bytes of a name are written
                     as %XX (an input "a/b" is read from DIR/a%2Fb.npy).
                     Each must be a regular file.
  --output-dir DIR   Without --steps: where to write one .npy per graph
                     output (DIR/<output>.npy, names encoded as for --data;
                     a bf16 output widened to float32). Created if missing.
                     Refused with --steps. Data of K times the compiled
                     batch (every input alike) runs as K batches, each
                     output concatenated along dim 0, when smpc found
                     every output computed sample by sample (plan.txt's
                     "outputs:" line; a model that mixes its samples, such as a
                     mean over the batch, is refused with the
                     --batch-size to compile with).
  --steps N          Train N steps (artifacts compiled with --train). Each
                     step takes the next batch of samples: the leading dim
                     of each DIR/<input>.npy holds the samples, wrapping
                     around (one stream, not epochs: with a sample count
                     that is not a multiple of the global batch, a batch
                     takes the last samples and the first again; the
                     first such step is noted). Prints the loss of every
                     step as it ends
                     ("step K loss L lr R grad_norm G", on stdout).
  --metrics FILE     With --steps: one JSON object per step, written as the
                     step ends: step, loss, lr, grad_norm, samples_per_s,
                     tokens_per_s (null without token ids), tflops_per_device
                     and mfu (from the compiler's FLOPs of a step and the
                     artifact's device peak; null when unknown), step_time
                     (s), time (unix seconds), elapsed (s since this launch
                     began), peak_bytes (rank 0's arena high-water mark),
                     peak_bytes_per_rank ([every rank's]), on a GPU
                     device_bytes and device_bytes_per_rank (the device's
                     memory in use after the step, cudaMemGetInfo), and
                     with fp16 loss_scale and skipped. Appended to with
                     --resume.
  --tensorboard-dir D  With --steps: write TensorBoard event files into D
                     (created if missing; a new file per launch): scalars
                     loss, lr, grad_norm, samples_per_s, tokens_per_s,
                     step_time, tflops_per_device, mfu, loss_scale (those
                     the run has) at every step.
  --progress MODE    With --steps, on stderr of rank 0: live (one line
                     redrawn every step), log (a line every --log-every
                     steps and at the first and last: iteration, loss, lr,
                     grad norm, tokens/s or samples/s, TFLOP/s per device,
                     MFU, ms/step, loss scale, elapsed, ETA), none, or auto
                     (default: live on a terminal, log otherwise: under
                     mpirun, srun, a pipe or a file).
  --log-every K      The log line every K steps (default 10).
  --eval-data DIR    With --steps: held-out samples, one .npy per data
                     input as for --data, evaluated after the last step
                     (and every --eval-every steps): each global batch
                     runs the training step's forward (what its loss is
                     computed from) with dropout off, as PyTorch's
                     model.eval() under torch.no_grad(), and nothing is
                     trained; the eval loss is the mean of the batches'
                     losses weighted by their samples (as the Hugging Face
                     Trainer's eval_loss). A sample count that is not a
                     multiple of the global batch ends in a short batch,
                     padded with labels -100 for a cross-entropy loss
                     (plan.txt says so) or, for an mse loss compiled
                     with --eval-predictions, scored from the real
                     samples' predictions; else left out (noted); smpc
                     --eval-batch-size sets other batches. Printed as
                     "eval step K loss L samples N" on stdout and written
                     as an eval_loss row to --metrics and eval/loss to
                     --tensorboard-dir. A batch norm normalises with its
                     running statistics there (the step with the batch's),
                     as model.eval() does.
  --eval-every K     With --eval-data: also evaluate after every K steps
                     (the Trainer's eval_steps).
  --eval-predictions DIR  With --eval-data and an artifact of smpc
                     --eval-predictions or --eval-logits: write each
                     evaluation's predictions as
                     DIR/predictions-step-K.npy (float32, a row per
                     sample: the argmax class of each row of the loss's
                     logits, an mse loss's output values, or with
                     --eval-logits the logits' rows [samples, rows,
                     classes]) and the labels input as fed as
                     DIR/label_ids.npy (the loss's LABELS or TARGET, a
                     model's own loss's input `labels`; a causal LM's
                     unshifted): the Trainer's EvalPrediction, for a
                     compute_metrics of your own. A short last batch's
                     padding is left out.
  --checkpoint-dir D With --steps: where checkpoints go (parameters and
                     optimizer state by name, written atomically).
  --checkpoint-every K  Save a checkpoint every K steps. Without it,
                     --checkpoint-dir saves one checkpoint after the last
                     step.
  --resume           Continue from the newest checkpoint in D (the data
                     position, the step count and the learning-rate
                     schedule come from it): --steps N is the total to
                     reach, which may be more than the first run's (the
                     schedule goes on as recorded; see smpc --decay-steps)
                     and print what was resumed. The checkpoint must agree
                     with MODEL.smpx: the same parameters (names, dtypes,
                     global shapes: a changed model is refused), the same
                     optimizer and hyper-parameters and the same global
                     batch; the plan (dp, tp, pp, micro-batches, ZeRO) may
                     differ.
  --reset-optimizer  With --resume: accept a checkpoint of another optimizer
                     or other hyper-parameters; the optimizer state starts
                     fresh (zero moments, step count 1) at the resumed step.
  --reset-data       With --resume: accept a checkpoint of another global
                     batch; the data restarts at sample 0.
  --ignore-unread-data  Train, evaluate or run forward on data whose
                     directory (--data, --eval-data) holds a mask
                     (*mask.npy: attention_mask.npy, ...) that masks some
                     positions, or token types (*token_type_ids.npy) not
                     all 0, that the model does not read (it was exported
                     without that input): refused without it, since the
                     model runs as if they were not there.
  --allow-copied-labels  Train labels of a cross_entropy loss that equal
                     a data input at every labelled position, or the
                     input's token before each (--data's, --eval-data's
                     first 1024 samples): refused without it, since that
                     is a causal LM's unshifted (or wrongly shifted) labels
                     (Hugging Face's collator sets labels = input_ids and
                     the model shifts them; smpc's loss does not), which
                     would teach the model to repeat its input.
  --save-onnx FILE   After training, write the original ONNX model with the
                     trained parameter values (external data beyond 2 GB).
                     FILE must be writable and the model readable (a
                     binary .onnx, not ONNX text) when smprun starts.
  --source-model F   The ONNX model --save-onnx writes back, where it is not
                     at the path smpc recorded (an artifact moved to another
                     machine): a copy of that file (its checksum is checked).
  -n, --ranks N      Run N ranks on this machine: smprun runs itself through
                     `mpirun -n N --oversubscribe --bind-to none smprun
                     <the other arguments>` (Open MPI; $SMP_MPIRUN names
                     another mpirun; as root smprun sets
                     OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1), relays SIGINT and
                     SIGTERM to the ranks (see STOPPING) and exits with
                     mpirun's status. N must be the number of ranks the
                     artifact was compiled for. Under a launcher (mpirun,
                     mpiexec, srun) every process takes its rank and the
                     run's size from the environment instead; 1 rank never
                     initializes MPI. srun without a PMI (--mpi=pmix) and
                     torchrun's RANK/WORLD_SIZE (no MPI) are refused with
                     the launchers that work (docs/launchers.md).
  --timeout SECONDS  With several ranks: how long one collective (all-reduce,
                     send, barrier, ...) may wait for the other ranks
                     (default 600), and also MPI start-up (MPI_Init, which
                     waits for every rank), the creation of rank groups and
                     MPI shut-down. When it expires the rank prints
                     "rank R: timed out after T s in <what>" and every
                     rank exits non-zero.
  --device D         Where each rank runs: cpu, cuda (rank r on its local
                     rank's GPU) or cuda:N (default: the artifact's
                     --target). The program is the same for both; the
                     target only steered the compiler's cost model.
  --threads N        Threads for the CPU kernels and OpenBLAS (default: the
                     cores this process may run on, divided by the ranks on
                     this machine).
  --profile FILE     Write each instruction's time (summed over the
                     steps; rank R > 0 of a multi-rank run writes
                     FILE.rank<R>) as JSON to FILE and print the time per
                     op. On a GPU the device's clock times each instruction
                     (timing events around it; nothing waits, the steps run
                     as unprofiled), and each entry also has the host's
                     time issuing it and the device's idle time before it;
                     on the CPU, each instruction's wall time.
  --profile-warmup K Profile the steps after the first K only (default 0):
                     a first step carries one-time costs (on a GPU, the
                     libraries' first calls: ~90 ms in GPT-2 124M's first
                     product) that are no step's.
  --check-finite     Scan every float output of every instruction as it
                     runs and stop at the first NaN, naming the
                     instruction, its ONNX node and output, whether its
                     inputs held NaN (and which buffer brought it in: data,
                     a parameter, another rank) and the first infinity of
                     the step (1/0 before 0 * inf); as PyTorch's
                     torch.autograd.detect_anomaly. Every output is read
                     back (on a GPU, copied to the host): for finding
                     where a NaN starts, not for training. Under fp16 loss
                     scaling an overflow the scaler would skip stops it too.
  --no-overlap       On a GPU, wait for each collective, pipeline message
                     and offload copy before the next instruction. By
                     default they run on their own streams (communication,
                     copies) while the compute stream goes on with the
                     instructions that do not touch their buffers, as
                     PyTorch's DDP overlaps its all-reduces with the
                     backward. The numbers are the same either way;
                     --profile and --check-finite wait so too.
  --cuda-graph       On a GPU, run each training step from the second on as
                     one CUDA graph: the second step's kernels, cuBLASLt
                     products and copies are recorded as they are queued
                     and each later step launches the record in one call
                     (as torch.cuda.graphs), the same numbers as without.
                     Also SMP_CUDA_GRAPH=1 (0 or unset: off). Dropout reads
                     each step's number from device memory, so each step
                     draws its own masks. Collectives and pipeline
                     messages (dp, tp, pp, ZeRO) are recorded on NCCL's
                     stream, every rank the same step. Refused, with what
                     to do, on the CPU and with --profile, --check-finite
                     or --no-overlap (they issue the instructions one by
                     one).
  -h, --help         Show this help.
  --version          Show the version.

STOPPING (SIGINT, SIGTERM, SIGUSR1)
  A training run that gets SIGINT (Ctrl-C), SIGTERM (a preemption, Slurm's
  time limit) or SIGUSR1 on any rank stops on every rank after the step in
  flight: it saves a checkpoint of that step when --checkpoint-dir is set,
  prints the command that resumes it (the same one with --resume) and exits
  with 128 + the signal (130 for SIGINT, 143 for SIGTERM). A second signal
  stops at once, without a checkpoint. `smprun -n N` relays a SIGINT or
  SIGTERM it gets to the ranks as SIGUSR1 (mpirun would kill them a second
  after SIGINT/SIGTERM; it forwards SIGUSR1); under mpirun directly send
  SIGUSR1 to mpirun (docs/launchers.md).

SEVERAL RANKS
  Every rank loads only its own files of the artifact (rank<R>.*). Rank 0
  prints the step lines and the progress and writes --metrics,
  --tensorboard-dir, --output-dir and --profile;
  every rank saves its own tensors in checkpoints (step-<K>/rank<R>.*), and
  rank 0 moves `latest` once all have written them. An error on one rank
  ends every rank.

ENVIRONMENT
  SMP_CUBLASLT_TUNE=1  On a GPU, time the first 8 algorithms cuBLASLt's
                     heuristic proposes for each matrix-product shape on
                     its first product and keep the fastest (as PyTorch's
                     cudnn.benchmark does for convolutions); the run ends
                     with a note per shape (the heuristic's first and the
                     fastest, in us and TFLOP/s). Off (0, or unset) by
                     default: the fastest can differ between runs, and
                     algorithms sum in other orders, so the bits may too.
  SMP_CUBLASLT_TUNE_FILE=F
                     Keep the tuning in F (as PyTorch's TunableOp keeps its
                     in PYTORCH_TUNABLEOP_FILENAME): with
                     SMP_CUBLASLT_TUNE=1 each shape's fastest algorithm is
                     written to F (created if missing; shapes already in it
                     are not timed again; ranks sharing F add theirs);
                     without, F must exist and its shapes run its
                     algorithms untimed, the same bits every run, others
                     the heuristic's first; the run ends with a note that
                     counts both. F records the GPU, its SM count and
                     cuBLASLt's version: a file of another is refused.
  SMP_ATTENTION_FORWARD_ROWS=64|128
                     On a GPU, the queries a block of the tensor-core
                     attention's forward (bf16/f16, head dims up to 64):
                     64 (the default) or 128 (each key and value fragment
                     serves two row tiles, at half the blocks an SM; on
                     wgmma, two warpgroups share each key and value tile).
                     The same bits either way.
  SMP_ATTENTION_GRAD_ROWS=64|128
                     On a GPU, the keys a block of that attention's
                     backward key pass and the queries a block of its query
                     pass (bf16/f16, head dims up to 64, no attention
                     dropout): 64 (the default) or 128 (32 a warp, each
                     fragment of the walked tile serving two row tiles, at
                     two blocks an SM; on wgmma, two warpgroups share each
                     walked tile). The same bits either way.
  SMP_ATTENTION_WGMMA=0|1|forward|backward
                     On an H100/H200, the tensor-core attention's forward
                     and backward (1), or the pass named, on Hopper's
                     wgmma (bf16/f16, head dim 64, no attention dropout):
                     the tensor cores read every tile from shared memory
                     themselves. Off (0) by default; within the tensor
                     cores' rounding of the default kernels. Refused on
                     another GPU.

EXAMPLE
  smpc compile gpt.onnx --batch-size 2 --dim seq=16 -o gpt.smpx
  smprun gpt.smpx --data inputs/ --output-dir outputs/
  smpc compile mlp.onnx --train --loss cross_entropy:logits:labels \
       --optimizer sgd --lr 0.1 --batch-size 8 -o mlp.smpx
  smprun mlp.smpx --data samples/ --steps 5 --metrics m.jsonl
  smprun -n 2 gpt.smpx --data samples/ --steps 200 --checkpoint-dir ck \
       --checkpoint-every 50 --tensorboard-dir tb --log-every 20
)";

/// SMP_CUDA_GRAPH (1: as --cuda-graph; 0, empty or unset: off) into
/// cli.cudaGraph; a value that is neither, or 0 beside --cuda-graph, is
/// refused.
std::optional<int> cudaGraphSetting(Cli &cli) {
  const char *env = std::getenv("SMP_CUDA_GRAPH");
  std::string v = env ? env : "";
  if (v.empty())
    return std::nullopt;
  if (v != "0" && v != "1")
    return fail("SMP_CUDA_GRAPH=" + v +
                " is not a setting: 1 (each training step from the second "
                "on as one CUDA graph, as --cuda-graph) or 0 (off)");
  if (v == "0" && cli.cudaGraph)
    return fail("--cuda-graph and SMP_CUDA_GRAPH=0 disagree; give one of "
                "them");
  cli.cudaGraph = v == "1";
  return std::nullopt;
}

/// The checks of a parsed command line that involve several flags.
std::optional<int> checkCli(const Cli &cli, const std::set<std::string> &given) {
  if (cli.model.empty())
    return fail("no MODEL.smpx given (see smprun --help)");
  if (cli.dataDir.empty())
    return fail("--data DIR is required: one .npy per graph input");
  if (cli.outDir.empty() && cli.steps == 0)
    return fail("--output-dir DIR is required (or --steps N to train)");
  if (!cli.outDir.empty() && cli.steps > 0)
    return fail("--output-dir is for running the model once (one .npy per "
                "output); with --steps the losses go to stdout and "
                "--metrics FILE, the trained model to --save-onnx FILE or "
                "--checkpoint-dir DIR");
  if (cli.progress != "auto" && cli.progress != "live" &&
      cli.progress != "log" && cli.progress != "none")
    return fail("--progress expects auto, live, log or none, got '" +
                cli.progress + "'");
  if (cli.steps == 0) {
    for (const char *flag :
         {"--checkpoint-dir", "--checkpoint-every", "--save-onnx",
          "--source-model", "--metrics", "--eval-data", "--eval-every",
          "--eval-predictions", "--tensorboard-dir", "--progress",
          "--log-every"})
      if (given.count(flag))
        return fail(std::string(flag) + " is for training; give --steps N");
    if (cli.resume)
      return fail("--resume is for training; give --steps N");
    if (cli.allowCopiedLabels)
      return fail("--allow-copied-labels is for training; give --steps N");
  }
  if (given.count("--log-every") &&
      (cli.progress == "live" || cli.progress == "none"))
    return fail("--log-every sets the progress log lines; --progress " +
                cli.progress + " prints none (use --progress log or auto)");
  if (std::string why;
      !cli.saveOnnx.empty() && !smp::base::canWriteFile(cli.saveOnnx, why))
    return fail(cli.saveOnnx + ": cannot write (" + why +
                "); --save-onnx needs a writable file, checked before "
                "training starts");
  if (!cli.sourceModel.empty() && cli.saveOnnx.empty())
    return fail("--source-model names the model --save-onnx writes back; "
                "give --save-onnx FILE too");
  if (cli.evalEvery > 0 && cli.evalDir.empty())
    return fail("--eval-every K evaluates held-out samples; give them with "
                "--eval-data DIR");
  if (!cli.evalPredictionsDir.empty() && cli.evalDir.empty())
    return fail("--eval-predictions DIR writes an evaluation's predictions; "
                "give the held-out samples with --eval-data DIR");
  if (given.count("--profile-warmup") && cli.profilePath.empty())
    return fail("--profile-warmup K sets the steps --profile leaves out; "
                "give --profile FILE too");
  if (cli.profileWarmup > 0 && cli.profileWarmup >= cli.steps)
    return fail("--profile-warmup " + std::to_string(cli.profileWarmup) +
                " leaves none of the " + std::to_string(cli.steps) +
                " step(s) to profile; give --steps over " +
                std::to_string(cli.profileWarmup));
  if (cli.cudaGraph && cli.steps == 0)
    return fail("--cuda-graph records the training step; give --steps N");
  if (cli.cudaGraph &&
      (!cli.profilePath.empty() || cli.checkFinite || cli.noOverlap))
    return fail(std::string("--cuda-graph launches each step as one graph, "
                            "but ") +
                (!cli.profilePath.empty() ? "--profile times each instruction"
                 : cli.checkFinite        ? "--check-finite reads each "
                                            "instruction's outputs"
                                          : "--no-overlap waits for each side "
                                            "step") +
                " as it is issued; give one or the other");
  if ((cli.ckptEvery > 0 || cli.resume) && cli.ckptDir.empty())
    return fail("--checkpoint-every and --resume need --checkpoint-dir");
  if ((cli.resetOptimizer || cli.resetData) && !cli.resume)
    return fail(std::string(cli.resetOptimizer ? "--reset-optimizer"
                                               : "--reset-data") +
                " applies to --resume (what to accept from the checkpoint "
                "resumed); give --resume --checkpoint-dir DIR");
  return std::nullopt;
}

} // namespace

/// Parses and checks the flags; returns an exit code when smprun is done
/// (help, version, an error).
std::optional<int> parseCli(int argc, char **argv, Cli &cli) {
  // Flags that take a value: where it goes, and the smallest integer allowed
  // (for integer flags).
  struct Flag {
    std::string *text = nullptr;
    int64_t *number = nullptr;
    int64_t min = 1, max = INT64_MAX;
  };
  const std::map<std::string, Flag> flags = {
      {"--data", {&cli.dataDir}},
      {"--output-dir", {&cli.outDir}},
      {"--metrics", {&cli.metricsPath}},
      {"--tensorboard-dir", {&cli.tensorboardDir}},
      {"--progress", {&cli.progress}},
      {"--profile", {&cli.profilePath}},
      {"--checkpoint-dir", {&cli.ckptDir}},
      {"--eval-data", {&cli.evalDir}},
      {"--eval-predictions", {&cli.evalPredictionsDir}},
      {"--eval-every", {nullptr, &cli.evalEvery}},
      {"--save-onnx", {&cli.saveOnnx}},
      {"--source-model", {&cli.sourceModel}},
      {"--device", {&cli.device}},
      {"--steps", {nullptr, &cli.steps}},
      {"--checkpoint-every", {nullptr, &cli.ckptEvery}},
      {"--log-every", {nullptr, &cli.logEvery}},
      {"--profile-warmup", {nullptr, &cli.profileWarmup, 0}},
      {"--threads", {nullptr, &cli.threads, 1, 1024}},
      {"-n", {nullptr, &cli.ranks, 1, 65536}},
      {"--ranks", {nullptr, &cli.ranks, 1, 65536}},
  };
  cli.argv0 = argv[0];
  cli.args.assign(argv + 1, argv + argc);
  const std::vector<std::string> &args = cli.args;
  if (args.empty()) {
    std::cerr << kUsage;
    return 1;
  }
  std::set<std::string> given;
  std::map<std::string, std::string> valueOf;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--version") {
      std::cout << "smprun 0.1.0\nCPU kernels: "
                << smp::kernels::cpu::simdPath() << "\n";
      return 0;
    }
    if (a == "--resume" || a == "--reset-optimizer" || a == "--reset-data" ||
        a == "--check-finite" || a == "--no-overlap" || a == "--cuda-graph" ||
        a == "--allow-copied-labels" || a == "--ignore-unread-data") {
      (a == "--resume"                ? cli.resume
       : a == "--reset-data"          ? cli.resetData
       : a == "--allow-copied-labels" ? cli.allowCopiedLabels
       : a == "--ignore-unread-data"  ? cli.ignoreUnreadData
       : a == "--check-finite"        ? cli.checkFinite
       : a == "--no-overlap"          ? cli.noOverlap
       : a == "--cuda-graph"          ? cli.cudaGraph
                                      : cli.resetOptimizer) = true;
      cli.forwarded.push_back(a);
      continue;
    }
    if (a == "--timeout") {
      if (i + 1 >= args.size())
        return fail(a + " needs a value");
      const std::string &v = args[++i];
      char *end;
      cli.timeout = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(cli.timeout > 0) || cli.timeout > 1e9)
        return fail(a + " expects a positive number of seconds, got '" + v +
                    "'");
      cli.forwarded.insert(cli.forwarded.end(), {a, v});
      continue;
    }
    // --flag=value as --flag value.
    std::string name = a, inlineValue;
    bool hasInline = false;
    if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
      name = a.substr(0, a.find('='));
      inlineValue = a.substr(a.find('=') + 1);
      hasInline = flags.count(name) != 0;
      if (!hasInline)
        name = a;
    }
    auto flag = flags.find(name);
    if (flag != flags.end()) {
      if (!hasInline && i + 1 >= args.size())
        return fail(a + " needs a value");
      const std::string &v = hasInline ? inlineValue : args[++i];
      // Given twice with another value: the last would silently win.
      if (auto [it, fresh] = valueOf.emplace(name == "--ranks" ? "-n" : name, v);
          !fresh && it->second != v)
        return fail(name + " is given twice, as '" + it->second +
                    "' and as '" + v + "'; give it once");
      given.insert(name);
      if (name != "-n" && name != "--ranks")
        cli.forwarded.insert(cli.forwarded.end(), {name, v});
      if (flag->second.text) {
        *flag->second.text = v;
        continue;
      }
      char *end;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || n < flag->second.min || n > flag->second.max)
        return fail(name + " expects a positive integer, got '" + v + "'");
      *flag->second.number = n;
    } else if (!a.empty() && a[0] == '-') {
      std::vector<std::string> known = {"--resume",
                                        "--reset-optimizer",
                                        "--reset-data",
                                        "--timeout",
                                        "--allow-copied-labels",
                                        "--ignore-unread-data",
                                        "--help",
                                        "--version"};
      for (const auto &entry : flags)
        known.push_back(entry.first);
      return fail("unknown option '" + a + "'" +
                  smp::base::didYouMean(a, known) + " (see smprun --help)");
    } else if (cli.model.empty()) {
      cli.model = a;
      cli.forwarded.push_back(a);
    } else {
      return fail("unexpected argument '" + a + "'");
    }
  }
  if (std::optional<int> done = cudaGraphSetting(cli))
    return done;
  return checkCli(cli, given);
}

} // namespace smprun
