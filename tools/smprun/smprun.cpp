//===- smprun.cpp - Runs an smp artifact ----------------------------------===//
//
// smprun [-n N] MODEL.smpx --data DIR --output-dir DIR [--threads N]
//
// Links no MLIR: it reads the protobuf artifact written by `smpc compile`.
// `-n N` runs N ranks on this machine through a child mpirun; under
// a launcher each process finds its rank in the environment (Launch.h).
//
//===----------------------------------------------------------------------===//

#include "RankHosts.h"
#include "smp/base/SignalSafe.h"
#include "smp/base/Suggest.h"
#include "smp/kernels/cpu/Kernels.h"
#include "smprt/Base.h"
#include "smprt/comm/Launch.h"
#include "smprt/exec/Artifact.h"
#include "smprt/exec/BackendRegistry.h"
#include "smprt/exec/Executor.h"
#include "smprt/train/Checkpoint.h"
#include "smprt/train/OnnxExport.h"
#include "smprt/train/Signals.h"
#include "smprt/train/Trainer.h"

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sched.h>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <vector>

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
                     compiled ones (see MODEL.smpx/plan.txt). In file names
                     '/', '\\', '%' and control bytes of a name are written
                     as %XX (an input "a/b" is read from DIR/a%2Fb.npy).
                     Each must be a regular file.
  --output-dir DIR   Without --steps: where to write one .npy per graph
                     output (DIR/<output>.npy, names encoded as for --data).
                     Created if missing. Refused with --steps.
  --steps N          Train N steps (artifacts compiled with --train). Each
                     step takes the next batch of samples: the leading dim
                     of each DIR/<input>.npy holds the samples, wrapping
                     around. Prints the loss of every step as it ends
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
  --save-onnx FILE   After training, write the original ONNX model with the
                     trained parameter values (external data beyond 2 GB).
                     FILE must be writable and the model readable when
                     smprun starts.
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
  --profile FILE     Write each instruction's wall time (summed over the
                     steps; rank R > 0 of a multi-rank run writes
                     FILE.rank<R>) as JSON to FILE and
                     print the time per op.
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

EXAMPLE
  smpc compile gpt.onnx --batch-size 2 --dim seq=16 -o gpt.smpx
  smprun gpt.smpx --data inputs/ --output-dir outputs/
  smpc compile mlp.onnx --train --loss cross_entropy:logits:labels \
       --optimizer sgd --lr 0.1 --batch-size 8 -o mlp.smpx
  smprun mlp.smpx --data samples/ --steps 5 --metrics m.jsonl
  smprun -n 2 gpt.smpx --data samples/ --steps 200 --checkpoint-dir ck \
       --checkpoint-every 50 --tensorboard-dir tb --log-every 20
)";

// Set once this process knows it is one rank of several: errors name the
// rank, and an error ends every rank (not only this one) once MPI is up.
std::string gRankPrefix;
smprt::Communicator *gComm = nullptr;

int fail(const std::string &msg) {
  std::cout.flush();
  // One line whatever the names quoted from the model or the files hold.
  std::string line;
  for (unsigned char c : msg) {
    if (c >= 0x20 && c != 0x7f) {
      line += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      line += buf;
    }
  }
  // One write(2): under mpirun a line written in pieces can be split by
  // the launcher's own messages (MPI_Abort's banner).
  line = "smprun: error: " + gRankPrefix + line + "\n";
  std::cerr.flush();
  smp::base::writeStderr(line.data(), line.size());
  if (gComm && gComm->size() > 1)
    gComm->abort(1);
  return 1;
}

std::string jsonEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20)
      continue;
    out += c;
  }
  return out;
}

/// Whether `path` can be written (created, or overwritten), without
/// truncating an existing file or leaving a new one behind.
bool writable(const std::string &path, std::string &why) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(path.c_str());
    return true;
  }
  if (errno == EEXIST)
    fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  why = std::strerror(errno);
  return false;
}

int availableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return 1;
}

/// Writes each instruction's wall time as JSON to `path`; with `summary`,
/// prints the time per op.
int writeProfile(const smprt::Executor &exec, const std::string &path,
                 double seconds, bool summary) {
  FILE *f = std::fopen(path.c_str(), "w");
  if (!f)
    return fail(path + ": cannot write");
  std::map<std::string, double> byOp;
  std::fprintf(f, "[\n");
  auto entries = exec.profile();
  for (size_t i = 0; i < entries.size(); ++i) {
    byOp[entries[i].op] += entries[i].seconds;
    std::fprintf(f,
                 "  {\"op\": \"%s\", \"node\": \"%s\", \"seconds\": %.9f, "
                 "\"calls\": %lld, \"elements\": %lld, \"flops\": %.6g, "
                 "\"bytes\": %.6g}%s\n",
                 entries[i].op.c_str(), jsonEscape(entries[i].loc).c_str(),
                 entries[i].seconds,
                 static_cast<long long>(entries[i].calls),
                 static_cast<long long>(entries[i].elements),
                 entries[i].flops, entries[i].bytes,
                 i + 1 < entries.size() ? "," : "");
  }
  std::fprintf(f, "]\n");
  std::fclose(f);
  if (!summary)
    return 0;
  std::vector<std::pair<double, std::string>> sorted;
  for (const auto &[op, t] : byOp)
    sorted.emplace_back(t, op);
  std::sort(sorted.rbegin(), sorted.rend());
  std::printf("time per op (profile in %s):\n", path.c_str());
  for (const auto &[t, op] : sorted)
    std::printf("  %-14s %8.3f s  %5.1f%%\n", op.c_str(), t,
                100.0 * t / std::max(seconds, 1e-12));
  return 0;
}

/// The command line.
struct Cli {
  std::string argv0, model, dataDir, outDir, profilePath, metricsPath,
      ckptDir, saveOnnx, sourceModel, tensorboardDir, progress = "auto";
  int64_t steps = 0, ckptEvery = 0, threads = 0, ranks = 0, logEvery = 10;
  double timeout = 600;
  bool resume = false, resetOptimizer = false, resetData = false;
  std::string device; // "": the artifact's target
  std::vector<std::string> args;
  // What `smprun -n N` passes on to each rank: everything but -n N.
  std::vector<std::string> forwarded;
};

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
          "--source-model", "--metrics",
          "--tensorboard-dir", "--progress", "--log-every"})
      if (given.count(flag))
        return fail(std::string(flag) + " is for training; give --steps N");
    if (cli.resume)
      return fail("--resume is for training; give --steps N");
  }
  if (given.count("--log-every") &&
      (cli.progress == "live" || cli.progress == "none"))
    return fail("--log-every sets the progress log lines; --progress " +
                cli.progress + " prints none (use --progress log or auto)");
  if (std::string why; !cli.saveOnnx.empty() && !writable(cli.saveOnnx, why))
    return fail(cli.saveOnnx + ": cannot write (" + why +
                "); --save-onnx needs a writable file, checked before "
                "training starts");
  if (!cli.sourceModel.empty() && cli.saveOnnx.empty())
    return fail("--source-model names the model --save-onnx writes back; "
                "give --save-onnx FILE too");
  if ((cli.ckptEvery > 0 || cli.resume) && cli.ckptDir.empty())
    return fail("--checkpoint-every and --resume need --checkpoint-dir");
  if ((cli.resetOptimizer || cli.resetData) && !cli.resume)
    return fail(std::string(cli.resetOptimizer ? "--reset-optimizer"
                                               : "--reset-data") +
                " applies to --resume (what to accept from the checkpoint "
                "resumed); give --resume --checkpoint-dir DIR");
  return std::nullopt;
}

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
      {"--save-onnx", {&cli.saveOnnx}},
      {"--source-model", {&cli.sourceModel}},
      {"--device", {&cli.device}},
      {"--steps", {nullptr, &cli.steps}},
      {"--checkpoint-every", {nullptr, &cli.ckptEvery}},
      {"--log-every", {nullptr, &cli.logEvery}},
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
    if (a == "--resume" || a == "--reset-optimizer" || a == "--reset-data") {
      (a == "--resume"       ? cli.resume
       : a == "--reset-data" ? cli.resetData
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
      std::vector<std::string> known = {"--resume", "--reset-optimizer",
                                        "--reset-data", "--timeout",
                                        "--help", "--version"};
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
  return checkCli(cli, given);
}

/// A word as a POSIX shell reads it back.
std::string shellQuote(const std::string &w) {
  if (!w.empty() &&
      w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789-_./=:,+@%") == std::string::npos)
    return w;
  std::string q = "'";
  for (char c : w)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// The command that resumes this run: its own with --resume.
std::string resumeCommand(const Cli &cli, const smprt::LaunchInfo &launch) {
  std::string cmd;
  const char *parentArgv0 = std::getenv("SMP_SMPRUN_ARGV0");
  const char *parentRanks = std::getenv("SMP_SMPRUN_RANKS");
  if (parentArgv0 && parentRanks) // started by `smprun -n N`
    cmd = shellQuote(parentArgv0) + " -n " + parentRanks;
  else if (launch.launcher == "slurm")
    cmd = "srun --mpi=pmix -n " + std::to_string(launch.size) + " " +
          shellQuote(cli.argv0);
  else if (launch.underLauncher())
    cmd = "mpirun -n " + std::to_string(launch.size) + " " +
          shellQuote(cli.argv0);
  else
    cmd = shellQuote(cli.argv0);
  for (const std::string &a : cli.args)
    if (a != "--resume" && a != "--reset-optimizer" && a != "--reset-data")
      cmd += " " + shellQuote(a);
  return cmd + " --resume";
}

/// What rank 0 says about a run stopped by a signal.
void reportStop(const Cli &cli, const smprt::LaunchInfo &launch,
                const smprt::TrainStop &stop) {
  std::string by = smprt::signalName(stop.signal);
  if (stop.signal == SIGUSR1 && std::getenv("SMP_SMPRUN_RANKS"))
    by = "a signal to smprun -n (relayed as SIGUSR1)";
  std::string line = "smprun: stopped by " + by + " after step " + std::to_string(stop.step) + " of " +
                     std::to_string(cli.steps);
  if (stop.checkpoint.empty())
    line += "; no --checkpoint-dir was given, so nothing was saved (give "
            "--checkpoint-dir DIR to be able to resume)\n";
  else
    line += "; checkpoint " + stop.checkpoint + "\nsmprun: resume with: " +
            resumeCommand(cli, launch) + "\n";
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

/// Writes the trained model with --save-onnx (gathered from every rank's
/// shards when there are several).
int saveOnnx(const Cli &cli, smprt::Executor &exec, smprt::Communicator &comm) {
  smprt::Status s =
      comm.size() == 1
          ? smprt::saveTrainedOnnx(exec, cli.saveOnnx)
          : smprt::saveTrainedOnnxGathered(exec, comm, cli.saveOnnx, cli.steps);
  if (!s.ok())
    return fail(s.error);
  if (comm.size() == 1)
    std::printf("wrote the trained model to %s\n", cli.saveOnnx.c_str());
  else if (comm.rank() == 0)
    std::printf("wrote the trained model to %s (gathered from %d ranks)\n",
                cli.saveOnnx.c_str(), comm.size());
  return 0;
}

/// smprun --steps N.
int trainModel(const Cli &cli, const smprt::LaunchInfo &launch,
               smprt::Executor &exec, smprt::Communicator &comm) {
  const int rank = comm.rank();
  smprt::TrainOptions topts;
  topts.steps = cli.steps;
  topts.dataDir = cli.dataDir;
  // Rank 0 reports for the run.
  topts.report = rank == 0;
  topts.progress = cli.progress == "live"   ? smprt::ProgressMode::Live
                   : cli.progress == "log"  ? smprt::ProgressMode::Log
                   : cli.progress == "none" ? smprt::ProgressMode::None
                   : isatty(2)              ? smprt::ProgressMode::Live
                                            : smprt::ProgressMode::Log;
  topts.logEvery = cli.logEvery;
  topts.metricsPath = cli.metricsPath;
  topts.tensorboardDir = cli.tensorboardDir;
  topts.checkpointDir = cli.ckptDir;
  topts.checkpointEvery = cli.ckptEvery;
  topts.resume = cli.resume;
  topts.resetOptimizer = cli.resetOptimizer;
  topts.resetData = cli.resetData;
  if (rank == 0)
    topts.onResume = [](bool warning, const std::string &line) {
      if (warning) {
        std::fflush(stdout);
        std::fprintf(stderr, "smprun: warning: %s\n", line.c_str());
      } else {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      }
    };
  std::vector<smprt::StepRecord> records;
  if (!cli.profilePath.empty())
    exec.enableProfiling();
  auto start = std::chrono::steady_clock::now();
  smprt::TrainStop stop;
  smprt::Status s = smprt::train(exec, topts, records, &stop);
  if (!s.ok())
    return fail(cli.model + ": " + s.error);
  if (stop.signal) {
    if (rank == 0)
      reportStop(cli, launch, stop);
    // No rank exits before rank 0 has said how to resume (mpirun ends the
    // others once one exits non-zero).
    if (!(s = comm.barrier("the stop barrier")).ok())
      return fail(s.error);
    return 128 + stop.signal;
  }
  if (!cli.saveOnnx.empty())
    if (int rc = saveOnnx(cli, exec, comm))
      return rc;
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  if (!(s = comm.barrier("the end barrier")).ok())
    return fail(s.error);
  // Every rank profiles: rank R > 0 writes FILE.rank<R>.
  if (!cli.profilePath.empty())
    if (int rc = writeProfile(exec,
                              rank == 0 ? cli.profilePath
                                        : cli.profilePath + ".rank" +
                                              std::to_string(rank),
                              seconds, rank == 0))
      return rc;
  if (rank != 0)
    return 0;
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  // The steps this launch ran (a resumed one starts past 1).
  std::string ran = std::to_string(records.size()) + " steps";
  if (!records.empty() && records.front().step > 1)
    ran += " (" + std::to_string(records.front().step) + " to " +
           std::to_string(records.back().step) + ")";
  std::printf("trained %s in %.3f s; arena %llu bytes planned, "
              "%llu bytes high-water",
              ran.c_str(), seconds,
              static_cast<unsigned long long>(exec.arenaBytes()),
              static_cast<unsigned long long>(exec.highWaterBytes()));
  if (exec.hostArenaBytes())
    std::printf("; host pool %llu bytes (offloaded activations)",
                static_cast<unsigned long long>(exec.hostArenaBytes()));
  uint64_t device = 0, inUse = 0, total = 0;
  for (const smprt::StepRecord &r : records)
    device = std::max(device, r.deviceBytes);
  if (device && exec.backend().deviceMemory(inUse, total))
    std::printf("; device memory %llu of %llu bytes in use at most",
                static_cast<unsigned long long>(device),
                static_cast<unsigned long long>(total));
  std::printf("; peak RSS %ld KiB\n", usage.ru_maxrss);
  return 0;
}

/// smprun --output-dir DIR: one run of the model.
int runOnce(const Cli &cli, const smprt::Artifact &artifact,
            smprt::Executor &exec, smprt::Communicator &comm) {
  smprt::Status s;
  std::vector<smprt::NpyArray> inputs(artifact.manifest.inputs_size());
  for (int i = 0; i < artifact.manifest.inputs_size(); ++i) {
    const std::string &name = artifact.manifest.inputs(i).name();
    std::string path = cli.dataDir + "/" + smprt::fileNameFor(name) + ".npy";
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return fail(path + ": missing; the model needs input '" + name +
                  "' as a .npy file");
    if (!(s = smprt::readNpy(path, inputs[i])).ok())
      return fail(s.error);
    if (!(s = exec.setInput(name, inputs[i].ref(), path)).ok())
      return fail(s.error);
  }
  const int rank = comm.rank();
  if (!cli.profilePath.empty() && rank == 0)
    exec.enableProfiling();
  auto start = std::chrono::steady_clock::now();
  if (!(s = exec.run()).ok())
    return fail(cli.model + ": " + s.error);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  if (!(s = comm.barrier("the end barrier")).ok())
    return fail(s.error);
  if (rank != 0)
    return 0; // rank 0 writes the outputs
  ::mkdir(cli.outDir.c_str(), 0755);
  for (const auto &[name, ref] : exec.outputs()) {
    std::string path = cli.outDir + "/" + smprt::fileNameFor(name) + ".npy";
    if (!(s = smprt::writeNpy(path, ref)).ok())
      return fail(s.error);
    std::cout << "wrote " << path << " (" << smprt::describe(ref) << ")\n";
  }
  if (!cli.profilePath.empty()) {
    if (int rc = writeProfile(exec, cli.profilePath, seconds, true))
      return rc;
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::printf("ran %d instructions in %.3f s; arena %llu bytes planned, "
              "%llu bytes high-water; peak RSS %ld KiB\n",
              artifact.program.instructions_size(), seconds,
              static_cast<unsigned long long>(exec.arenaBytes()),
              static_cast<unsigned long long>(exec.highWaterBytes()),
              usage.ru_maxrss);
  return 0;
}

/// `smprun -n N` outside a launcher: runs the ranks through mpirun and
/// exits with its status.
int launchRanks(const Cli &cli, int worldSize) {
  std::vector<std::string> forwarded = cli.forwarded;
  // The terminal is this process's: mpirun hands the ranks pipes.
  if (cli.steps > 0 && cli.progress == "auto" && isatty(2))
    forwarded.insert(forwarded.end(), {"--progress", "live"});
  ::setenv("SMP_SMPRUN_ARGV0", cli.argv0.c_str(), 1);
  ::setenv("SMP_SMPRUN_RANKS", std::to_string(worldSize).c_str(), 1);
  int rc = 1;
  smprt::Status s = smprt::runMpirun(worldSize, forwarded, cli.steps > 0, rc);
  if (!s.ok())
    return fail(s.error);
  return rc;
}

} // namespace

int main(int argc, char **argv) {
  Cli cli;
  if (auto rc = parseCli(argc, argv, cli))
    return *rc;
  // How many ranks, and which one this process is.
  smprt::LaunchInfo launch;
  smprt::Status s = smprt::detectLaunch(launch);
  if (!s.ok())
    return fail(s.error);
  if (launch.size > 1)
    gRankPrefix = "rank " + std::to_string(launch.rank) + ": ";
  if (cli.ranks > 0 && launch.underLauncher() && cli.ranks != launch.size)
    return fail("-n " + std::to_string(cli.ranks) + " was given but the " +
                "launcher (" + launch.launcher + ") started " +
                std::to_string(launch.size) + " ranks");
  int worldSize = launch.underLauncher() ? launch.size
                                         : static_cast<int>(std::max<int64_t>(
                                               cli.ranks, 1));
  {
    smp::artifact::Manifest manifest;
    if (!(s = smprt::loadManifest(cli.model, manifest)).ok())
      return fail(s.error);
    if (!(s = smprt::checkRankCount(cli.model, manifest.num_ranks(),
                                    worldSize))
             .ok())
      return fail(s.error);
  }
  if (worldSize > 1 && !launch.underLauncher())
    return launchRanks(cli, worldSize);
  smprt::MpiOptions mpiOptions;
  mpiOptions.timeoutSeconds = cli.timeout;
  std::unique_ptr<smprt::Communicator> comm;
  if (!(s = smprt::createCommunicator(launch, mpiOptions, comm)).ok())
    return fail(s.error);
  // A training run stops cleanly on SIGINT/SIGTERM/SIGUSR1 (Signals.h);
  // after MPI_Init, whose handlers the second signal goes on to.
  if (cli.steps > 0)
    smprt::installStopHandlers();
  gComm = comm.get();
  const int rank = comm->rank();
  int localRanks = launch.localSize > 0 ? launch.localSize : comm->localSize();
  smp::kernels::cpu::setNumThreads(
      cli.threads > 0 ? static_cast<int>(cli.threads)
                      : smprt::threadsPerRank(availableCores(), localRanks));

  smprt::Artifact artifact;
  s = smprt::loadArtifact(cli.model, static_cast<uint32_t>(rank), artifact);
  if (s.ok() && !cli.saveOnnx.empty() && artifact.manifest.has_training())
    s = smprt::findSourceModel(artifact, cli.sourceModel);
  if (!s.ok())
    return fail(s.error);
  std::unique_ptr<smprt::Backend> backend;
  if (cli.device.empty()) {
    if (!(s = smprt::makeBackend(artifact.manifest.target(), launch.localRank,
                                 backend))
             .ok())
      return fail(cli.model + ": compiled for target '" +
                  artifact.manifest.target() + "': " + s.error +
                  "; run it on the CPU with --device cpu");
  } else if (!(s = smprt::makeBackend(cli.device, launch.localRank, backend))
                  .ok()) {
    return fail(s.error);
  }
  smprt::Executor exec;
  exec.setCommunicator(comm.get());
  exec.setBackend(backend.get());
  if (!(s = exec.init(artifact)).ok())
    return fail(s.error);
  if (artifact.manifest.has_training() != (cli.steps > 0))
    return fail(artifact.manifest.has_training()
                    ? cli.model + ": a training artifact; give --steps N"
                    : cli.model + ": not a training artifact (compile with "
                                  "--train) but --steps was given");
  if (!(s = comm->barrier("the start barrier, after loading the artifact"))
           .ok())
    return fail(s.error);
  if (comm->size() > 1) {
    // The hosts were unknown when smpc wrote plan.txt's rank map.
    std::vector<std::string> hostLines;
    if (!(s = rankHostMap(*comm, artifact.program, hostLines)).ok())
      return fail(s.error);
    for (const std::string &line : hostLines)
      std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  if (cli.steps > 0)
    return trainModel(cli, launch, exec, *comm);
  return runOnce(cli, artifact, exec, *comm);
}
