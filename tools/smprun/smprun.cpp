//===- smprun.cpp - Runs an smp artifact ----------------------------------===//
//
// smprun [-n N] MODEL.smpx --data DIR --output-dir DIR [--threads N]
//
// Links no MLIR: it reads the protobuf artifact written by `smpc compile`.
// `-n N` runs N ranks on this machine through a child mpirun; under
// a launcher each process finds its rank in the environment (Launch.h).
//
//===----------------------------------------------------------------------===//

#include "Cli.h"
#include "ForwardRun.h"
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

namespace smprun {
namespace {
// Set once this process knows it is one rank of several: errors name the
// rank, and an error ends every rank (not only this one) once MPI is up.
std::string gRankPrefix;
smprt::Communicator *gComm = nullptr;
// A rank of several started by srun (through PMIx), until MPI is up: srun
// does not end a step when one of its tasks exits (unless
// --kill-on-bad-exit), so a rank that fails before MPI_Init would leave the
// others waiting in theirs until --timeout or the job's time limit. Such a
// failure brings MPI up and aborts it, which ends every rank at once.
std::optional<smprt::LaunchInfo> gSrunBeforeMpi;
smprt::MpiOptions gMpiOptions;

/// Ends every rank of an srun step from this one, which failed before MPI
/// was up: joins MPI_Init (the others are waiting in theirs, or join it
/// failing likewise) and aborts.
void abortSrunStep() {
  smprt::LaunchInfo launch = *gSrunBeforeMpi;
  gSrunBeforeMpi.reset();
  std::unique_ptr<smprt::Communicator> comm;
  if (smprt::createCommunicator(launch, gMpiOptions, comm).ok())
    comm->abort(1);
}
} // namespace

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
  if (!gComm && gSrunBeforeMpi)
    abortSrunStep();
  return 1;
}

namespace {

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
  // The device's idle time before each step's first instruction (since the
  // previous step's end) and before the others.
  double host = 0.0, idleSteps = 0.0, idle = 0.0;
  bool first = true;
  std::string clock = exec.profileClock();
  std::fprintf(f, "[\n");
  auto entries = exec.profile();
  for (size_t i = 0; i < entries.size(); ++i) {
    byOp[entries[i].op] += entries[i].seconds;
    host += entries[i].hostSeconds;
    (first ? idleSteps : idle) += entries[i].idleSeconds;
    first = first && entries[i].calls == 0;
    std::fprintf(f,
                 "  {\"op\": \"%s\", \"node\": \"%s\", \"seconds\": %.9f, "
                 "\"clock\": \"%s\", \"host_seconds\": %.9f, "
                 "\"idle_seconds\": %.9f, "
                 "\"calls\": %lld, \"elements\": %lld, \"flops\": %.6g, "
                 "\"bytes\": %.6g, \"scratch_bytes\": %llu}%s\n",
                 entries[i].op.c_str(), jsonEscape(entries[i].loc).c_str(),
                 entries[i].seconds, clock.c_str(), entries[i].hostSeconds,
                 entries[i].idleSeconds,
                 static_cast<long long>(entries[i].calls),
                 static_cast<long long>(entries[i].elements), entries[i].flops,
                 entries[i].bytes,
                 static_cast<unsigned long long>(entries[i].scratchBytes),
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
  std::printf("time per op (profile in %s; %s):\n", path.c_str(),
              clock == "device" ? "the device's clock, nothing waited for"
                                : "the host's clock");
  int width = 14;
  for (const auto &[t, op] : sorted)
    width = std::max(width, static_cast<int>(op.size()));
  for (const auto &[t, op] : sorted)
    std::printf("  %-*s %8.3f s  %5.1f%%\n", width, op.c_str(), t,
                100.0 * t / std::max(seconds, 1e-12));
  if (clock == "device")
    std::printf("  the host issued them in %.3f s; the device waited for "
                "it %.3f s between the instructions and %.3f s between the "
                "steps\n",
                host, idle, idleSteps);
  return 0;
}

namespace {

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

/// Of a device's `inUse` bytes: " (arena A, kernels' scratch S at most in a
/// pool of P, cuBLASLt workspace W; the rest R: ...)", or "" where the
/// backend cannot tell.
std::string deviceMemoryParts(const smprt::Backend &backend, uint64_t inUse) {
  smprt::Backend::DeviceMemoryParts p;
  if (!backend.deviceMemoryParts(p))
    return "";
  uint64_t known = p.allocated + p.poolHigh + p.workspace + p.graphHigh;
  auto n = [](uint64_t v) { return std::to_string(v); };
  return " (arena " + n(p.allocated) + ", kernels' scratch " +
         n(p.scratchHigh) + " at most in a pool of " + n(p.poolHigh) +
         (p.graphHigh ? ", the CUDA graph's scratch " + n(p.graphHigh) : "") +
         ", cuBLASLt workspace " + n(p.workspace) + "; the rest " +
         n(inUse > known ? inUse - known : 0) +
         ": the CUDA context, the loaded code, NCCL's buffers)";
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
  topts.evalDir = cli.evalDir;
  topts.evalPredictionsDir = cli.evalPredictionsDir;
  topts.evalEvery = cli.evalEvery;
  topts.resume = cli.resume;
  topts.resetOptimizer = cli.resetOptimizer;
  topts.resetData = cli.resetData;
  topts.allowCopiedLabels = cli.allowCopiedLabels;
  topts.ignoreUnreadData = cli.ignoreUnreadData;
  if (rank == 0)
    topts.onNote = [](bool warning, const std::string &line) {
      if (warning) {
        std::fflush(stdout);
        std::fprintf(stderr, "smprun: warning: %s\n", line.c_str());
      } else {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      }
    };
  std::vector<smprt::StepRecord> records;
  smprt::Status profiling;
  if (!cli.profilePath.empty() && !(profiling = exec.enableProfiling()).ok())
    return fail(cli.model + ": " + profiling.error);
  auto start = std::chrono::steady_clock::now();
  // --profile-warmup K: the profile (and its run time) restart after step K.
  auto profileStart = start;
  if (cli.profileWarmup > 0)
    topts.afterStep = [&, first = true](int64_t done) mutable {
      if (first && done >= cli.profileWarmup) {
        first = false;
        profiling = exec.enableProfiling();
        profileStart = std::chrono::steady_clock::now();
      }
    };
  smprt::TrainStop stop;
  smprt::Status s = smprt::train(exec, topts, records, &stop);
  if (!s.ok())
    return fail(cli.model + ": " + s.error);
  if (!profiling.ok())
    return fail(cli.model + ": " + profiling.error);
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
  auto end = std::chrono::steady_clock::now();
  double seconds = std::chrono::duration<double>(end - start).count();
  double profiled = std::chrono::duration<double>(end - profileStart).count();
  if (!(s = comm.barrier("the end barrier")).ok())
    return fail(s.error);
  // Every rank profiles: rank R > 0 writes FILE.rank<R>.
  if (!cli.profilePath.empty())
    if (int rc = writeProfile(exec,
                              rank == 0 ? cli.profilePath
                                        : cli.profilePath + ".rank" +
                                              std::to_string(rank),
                              profiled, rank == 0))
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
    std::printf("; device memory %llu of %llu bytes in use at most%s",
                static_cast<unsigned long long>(device),
                static_cast<unsigned long long>(total),
                deviceMemoryParts(exec.backend(), device).c_str());
  std::printf("; peak RSS %ld KiB\n", usage.ru_maxrss);
  for (const std::string &n : exec.backend().notes())
    std::printf("note: %s\n", n.c_str());
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
} // namespace smprun

int main(int argc, char **argv) {
  using namespace smprun;
  // How many ranks, and which one this process is (its errors come after
  // the command line's).
  smprt::LaunchInfo launch;
  smprt::Status s = smprt::detectLaunch(launch);
  if (s.ok() && launch.launcher == "slurm" && launch.size > 1)
    gSrunBeforeMpi = launch;
  Cli cli;
  if (auto rc = parseCli(argc, argv, cli))
    return *rc;
  gMpiOptions.timeoutSeconds = cli.timeout;
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
  std::unique_ptr<smprt::Communicator> comm;
  gSrunBeforeMpi.reset(); // MPI's own failures are not to be retried
  if (!(s = smprt::createCommunicator(launch, gMpiOptions, comm)).ok())
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
  if (cli.checkFinite)
    exec.enableFiniteChecks();
  exec.setOverlap(!cli.noOverlap);
  if (cli.cudaGraph && cli.steps > 0 && !(s = exec.enableGraphs()).ok())
    return fail(cli.model + ": " + s.error);
  if (artifact.manifest.has_training() != (cli.steps > 0))
    return fail(artifact.manifest.has_training()
                    ? cli.model +
                          ": a training artifact; give --steps N to train "
                          "it. To run the model forward (--output-dir), "
                          "compile it without --train: the trained one "
                          "from --save-onnx FILE or `smp-checkpoint export "
                          "CKPT_DIR --format onnx -o FILE`, then smpc "
                          "compile FILE --batch-size B"
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
  return runForward(cli, artifact, exec, *comm);
}
