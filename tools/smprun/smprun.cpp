//===- smprun.cpp - Runs an smp artifact ----------------------------------===//
//
// smprun [-n N] MODEL.smpx --data DIR --output-dir DIR [--threads N]
//
// Links no MLIR: it reads the protobuf artifact written by `smpc compile`.
// `-n N` runs N ranks on this machine by re-executing through mpirun; under
// a launcher each process finds its rank in the environment (Launch.h).
//
//===----------------------------------------------------------------------===//

#include "RankHosts.h"
#include "smp/base/Suggest.h"
#include "smp/kernels/cpu/Kernels.h"
#include "smprt/Base.h"
#include "smprt/comm/Launch.h"
#include "smprt/exec/Artifact.h"
#include "smprt/exec/BackendRegistry.h"
#include "smprt/exec/Executor.h"
#include "smprt/train/Checkpoint.h"
#include "smprt/train/OnnxExport.h"
#include "smprt/train/Trainer.h"

#include <cerrno>
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
                     around. Prints the loss of every step.
  --metrics FILE     With --steps: one JSON object per step (step, loss, lr,
                     grad_norm, samples_per_s, peak_bytes).
  --checkpoint-dir D With --steps: where checkpoints go (parameters and
                     optimizer state by name, written atomically).
  --checkpoint-every K  Save a checkpoint every K steps. Without it,
                     --checkpoint-dir saves one checkpoint after the last
                     step.
  --resume           Continue from the newest checkpoint in D (the data
                     position and the step count come from it) and print
                     what was resumed. The checkpoint must agree with
                     MODEL.smpx: the same parameters (names, dtypes, global
                     shapes: a changed model is refused), the same optimizer
                     and hyper-parameters and the same global batch; the
                     plan (dp, tp, pp, micro-batches, ZeRO) may differ.
  --reset-optimizer  With --resume: accept a checkpoint of another optimizer
                     or other hyper-parameters; the optimizer state starts
                     fresh (zero moments, step count 1) at the resumed step.
  --reset-data       With --resume: accept a checkpoint of another global
                     batch; the data restarts at sample 0.
  --save-onnx FILE   After training, write the original ONNX model with the
                     trained parameter values (external data beyond 2 GB).
                     FILE must be writable when smprun starts.
  -n, --ranks N      Run N ranks on this machine: smprun re-executes itself
                     as `mpirun -n N --oversubscribe --bind-to none smprun
                     <the other arguments>` (Open MPI; $SMP_MPIRUN names
                     another mpirun; as root smprun sets
                     OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM)=1) and exits with
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

SEVERAL RANKS
  Every rank loads only its own files of the artifact (rank<R>.*). Rank 0
  prints the step lines and writes --metrics, --output-dir and --profile;
  every rank saves its own tensors in checkpoints (step-<K>/rank<R>.*), and
  rank 0 moves `latest` once all have written them. An error on one rank
  ends every rank.

EXAMPLE
  smpc compile gpt.onnx --batch-size 2 --dim seq=16 -o gpt.smpx
  smprun gpt.smpx --data inputs/ --output-dir outputs/
  smpc compile mlp.onnx --train --loss cross_entropy:logits:labels \
       --optimizer sgd --lr 0.1 --batch-size 8 -o mlp.smpx
  smprun mlp.smpx --data samples/ --steps 5 --metrics m.jsonl
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
  for (size_t at = 0; at < line.size();) {
    ssize_t n = ::write(2, line.data() + at, line.size() - at);
    if (n <= 0)
      break;
    at += static_cast<size_t>(n);
  }
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

} // namespace

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

int main(int argc, char **argv) {
  std::string model, dataDir, outDir, profilePath, metricsPath, ckptDir,
      saveOnnx;
  int64_t steps = 0, ckptEvery = 0, threads = 0, ranks = 0;
  double timeout = 600;
  bool resume = false, resetOptimizer = false, resetData = false;
  std::string device; // "": the artifact's target
  // Flags that take a value: where it goes, and the smallest integer allowed
  // (for integer flags).
  struct Flag {
    std::string *text = nullptr;
    int64_t *number = nullptr;
    int64_t min = 1, max = INT64_MAX;
  };
  const std::map<std::string, Flag> flags = {
      {"--data", {&dataDir}},
      {"--output-dir", {&outDir}},
      {"--metrics", {&metricsPath}},
      {"--profile", {&profilePath}},
      {"--checkpoint-dir", {&ckptDir}},
      {"--save-onnx", {&saveOnnx}},
      {"--device", {&device}},
      {"--steps", {nullptr, &steps}},
      {"--checkpoint-every", {nullptr, &ckptEvery}},
      {"--threads", {nullptr, &threads, 1, 1024}},
      {"-n", {nullptr, &ranks, 1, 65536}},
      {"--ranks", {nullptr, &ranks, 1, 65536}},
  };
  std::vector<std::string> args(argv + 1, argv + argc);
  // What `smprun -n N` passes on to each rank: everything but -n N.
  std::vector<std::string> forwarded;
  if (args.empty()) {
    std::cerr << kUsage;
    return 1;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (a == "--version") {
      std::cout << "smprun 0.1.0\n";
      return 0;
    }
    if (a == "--resume" || a == "--reset-optimizer" || a == "--reset-data") {
      (a == "--resume" ? resume
                       : a == "--reset-data" ? resetData : resetOptimizer) = true;
      forwarded.push_back(a);
      continue;
    }
    if (a == "--timeout") {
      if (i + 1 >= args.size())
        return fail(a + " needs a value");
      const std::string &v = args[++i];
      char *end;
      timeout = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(timeout > 0) || timeout > 1e9)
        return fail(a + " expects a positive number of seconds, got '" + v +
                    "'");
      forwarded.insert(forwarded.end(), {a, v});
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
      if (name != "-n" && name != "--ranks")
        forwarded.insert(forwarded.end(), {name, v});
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
    } else if (model.empty()) {
      model = a;
      forwarded.push_back(a);
    } else {
      return fail("unexpected argument '" + a + "'");
    }
  }
  if (model.empty())
    return fail("no MODEL.smpx given (see smprun --help)");
  if (dataDir.empty())
    return fail("--data DIR is required: one .npy per graph input");
  if (outDir.empty() && steps == 0)
    return fail("--output-dir DIR is required (or --steps N to train)");
  if (!outDir.empty() && steps > 0)
    return fail("--output-dir is for running the model once (one .npy per "
                "output); with --steps the losses go to stdout and "
                "--metrics FILE, the trained model to --save-onnx FILE or "
                "--checkpoint-dir DIR");
  if (steps == 0) {
    const std::pair<const char *, bool> trainingOnly[] = {
        {"--checkpoint-dir", !ckptDir.empty()},
        {"--checkpoint-every", ckptEvery > 0},
        {"--resume", resume},
        {"--save-onnx", !saveOnnx.empty()},
        {"--metrics", !metricsPath.empty()}};
    for (const auto &[flag, value] : trainingOnly)
      if (value)
        return fail(std::string(flag) + " is for training; give --steps N");
  }
  if (std::string why; !saveOnnx.empty() && !writable(saveOnnx, why))
    return fail(saveOnnx + ": cannot write (" + why +
                "); --save-onnx needs a writable file, checked before "
                "training starts");

  if ((ckptEvery > 0 || resume) && ckptDir.empty())
    return fail("--checkpoint-every and --resume need --checkpoint-dir");
  if ((resetOptimizer || resetData) && !resume)
    return fail(std::string(resetOptimizer ? "--reset-optimizer" : "--reset-data") +
                " applies to --resume (what to accept from the checkpoint "
                "resumed); give --resume --checkpoint-dir DIR");

  // How many ranks, and which one this process is.
  smprt::LaunchInfo launch;
  smprt::Status s = smprt::detectLaunch(launch);
  if (!s.ok())
    return fail(s.error);
  if (launch.size > 1)
    gRankPrefix = "rank " + std::to_string(launch.rank) + ": ";
  if (ranks > 0 && launch.underLauncher() && ranks != launch.size)
    return fail("-n " + std::to_string(ranks) + " was given but the " +
                "launcher (" + launch.launcher + ") started " +
                std::to_string(launch.size) + " ranks");
  int worldSize = launch.underLauncher() ? launch.size
                                         : static_cast<int>(std::max<int64_t>(
                                               ranks, 1));
  {
    smp::artifact::Manifest manifest;
    if (!(s = smprt::loadManifest(model, manifest)).ok())
      return fail(s.error);
    if (!(s = smprt::checkRankCount(model, manifest.num_ranks(), worldSize))
             .ok())
      return fail(s.error);
  }
  if (worldSize > 1 && !launch.underLauncher()) {
    s = smprt::execMpirun(worldSize, forwarded);
    return fail(s.error); // only reached if mpirun could not be started
  }
  smprt::MpiOptions mpiOptions;
  mpiOptions.timeoutSeconds = timeout;
  std::unique_ptr<smprt::Communicator> comm;
  if (!(s = smprt::createCommunicator(launch, mpiOptions, comm)).ok())
    return fail(s.error);
  gComm = comm.get();
  const int rank = comm->rank();
  int localRanks = launch.localSize > 0 ? launch.localSize : comm->localSize();
  smp::kernels::cpu::setNumThreads(
      threads > 0 ? static_cast<int>(threads)
                  : smprt::threadsPerRank(availableCores(), localRanks));

  smprt::Artifact artifact;
  s = smprt::loadArtifact(model, static_cast<uint32_t>(rank), artifact);
  if (!s.ok())
    return fail(s.error);
  std::unique_ptr<smprt::Backend> backend;
  if (device.empty()) {
    if (!(s = smprt::makeBackend(artifact.manifest.target(), launch.localRank,
                                 backend))
             .ok())
      return fail(model + ": compiled for target '" +
                  artifact.manifest.target() + "': " + s.error +
                  "; run it on the CPU with --device cpu");
  } else if (!(s = smprt::makeBackend(device, launch.localRank, backend))
                  .ok()) {
    return fail(s.error);
  }
  smprt::Executor exec;
  exec.setCommunicator(comm.get());
  exec.setBackend(backend.get());
  if (!(s = exec.init(artifact)).ok())
    return fail(s.error);
  if (artifact.manifest.has_training() != (steps > 0))
    return fail(artifact.manifest.has_training()
                    ? model + ": a training artifact; give --steps N"
                    : model + ": not a training artifact (compile with "
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
  if (steps > 0) {
    smprt::TrainOptions topts;
    topts.steps = steps;
    topts.dataDir = dataDir;
    // Rank 0 reports for the run.
    topts.metricsPath = rank == 0 ? metricsPath : "";
    topts.progress = rank == 0 && isatty(2);
    topts.checkpointDir = ckptDir;
    topts.checkpointEvery = ckptEvery;
    topts.resume = resume;
    topts.resetOptimizer = resetOptimizer;
    topts.resetData = resetData;
    if (rank == 0)
      topts.report = [](bool warning, const std::string &line) {
        if (warning) {
          std::fflush(stdout);
          std::fprintf(stderr, "smprun: warning: %s\n", line.c_str());
        } else {
          std::printf("%s\n", line.c_str());
          std::fflush(stdout);
        }
      };
    std::vector<smprt::StepRecord> records;
    if (!profilePath.empty())
      exec.enableProfiling();
    auto start = std::chrono::steady_clock::now();
    s = smprt::train(exec, topts, records);
    if (rank != 0)
      records.clear();
    for (const auto &r : records) {
      std::printf("step %lld loss %.6f lr %.6g grad_norm %.6f",
                  static_cast<long long>(r.step), r.loss, r.lr, r.gradNorm);
      if (r.lossScale > 0)
        std::printf(" loss_scale %g%s", r.lossScale,
                    r.skipped ? " (skipped: gradients overflowed)" : "");
      std::printf("\n");
    }
    if (!s.ok())
      return fail(model + ": " + s.error);
    if (!saveOnnx.empty() && comm->size() == 1) {
      if (!(s = smprt::saveTrainedOnnx(exec, saveOnnx)).ok())
        return fail(s.error);
      std::printf("wrote the trained model to %s\n", saveOnnx.c_str());
    } else if (!saveOnnx.empty()) {
      // Several ranks: every rank writes its shards as a checkpoint beside
      // the output, rank 0 gathers each parameter whole and writes the model.
      std::string gather = saveOnnx + ".shards", written;
      if (!(s = smprt::saveCheckpoint(exec, gather, steps, steps, written)).ok())
        return fail(s.error);
      if (rank == 0) {
        std::map<std::string, smprt::GlobalTensor> whole;
        if (!(s = smprt::readGlobalTensors(gather, "param", whole)).ok())
          return fail(s.error);
        std::map<std::string, smprt::TrainedTensor> views;
        for (const auto &[name, g] : whole)
          views[name] = smprt::TrainedTensor{g.dtype, g.shape, g.bytes.data(),
                                             g.bytes.size()};
        if (!(s = smprt::saveTrainedOnnx(exec.artifact(), views, saveOnnx)).ok())
          return fail(s.error);
        std::error_code ec;
        std::filesystem::remove_all(gather, ec);
        std::printf("wrote the trained model to %s (gathered from %d ranks)\n",
                    saveOnnx.c_str(), comm->size());
      }
    }
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - start)
                         .count();
    if (!(s = comm->barrier("the end barrier")).ok())
      return fail(s.error);
    // Every rank profiles: rank R > 0 writes FILE.rank<R>.
    if (!profilePath.empty())
      if (int rc = writeProfile(exec,
                                rank == 0 ? profilePath
                                          : profilePath + ".rank" +
                                                std::to_string(rank),
                                seconds, rank == 0))
        return rc;
    if (rank != 0)
      return 0;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    std::printf("trained %lld steps in %.3f s; arena %llu bytes planned, "
                "%llu bytes high-water",
                static_cast<long long>(steps), seconds,
                static_cast<unsigned long long>(exec.arenaBytes()),
                static_cast<unsigned long long>(exec.highWaterBytes()));
    if (exec.hostArenaBytes())
      std::printf("; host pool %llu bytes (offloaded activations)",
                  static_cast<unsigned long long>(exec.hostArenaBytes()));
    std::printf("; peak RSS %ld KiB\n", usage.ru_maxrss);
    return 0;
  }
  std::vector<smprt::NpyArray> inputs(artifact.manifest.inputs_size());
  for (int i = 0; i < artifact.manifest.inputs_size(); ++i) {
    const std::string &name = artifact.manifest.inputs(i).name();
    std::string path = dataDir + "/" + smprt::fileNameFor(name) + ".npy";
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return fail(path + ": missing; the model needs input '" + name +
                  "' as a .npy file");
    if (!(s = smprt::readNpy(path, inputs[i])).ok())
      return fail(s.error);
    if (!(s = exec.setInput(name, inputs[i].ref(), path)).ok())
      return fail(s.error);
  }
  if (!profilePath.empty() && rank == 0)
    exec.enableProfiling();
  auto start = std::chrono::steady_clock::now();
  if (!(s = exec.run()).ok())
    return fail(model + ": " + s.error);
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  if (!(s = comm->barrier("the end barrier")).ok())
    return fail(s.error);
  if (rank != 0)
    return 0; // rank 0 writes the outputs
  ::mkdir(outDir.c_str(), 0755);
  for (const auto &[name, ref] : exec.outputs()) {
    std::string path = outDir + "/" + smprt::fileNameFor(name) + ".npy";
    if (!(s = smprt::writeNpy(path, ref)).ok())
      return fail(s.error);
    std::cout << "wrote " << path << " (" << smprt::describe(ref) << ")\n";
  }
  if (!profilePath.empty()) {
    if (int rc = writeProfile(exec, profilePath, seconds, true))
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
