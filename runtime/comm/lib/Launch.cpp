//===- Launch.cpp - Rank discovery and multi-rank launching ---------------===//

#include "smprt/comm/Launch.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <initializer_list>
#include <sys/wait.h>
#include <unistd.h>

namespace smprt {
namespace {

/// A decimal integer in [0, INT_MAX].
bool parseCount(const char *text, int &value) {
  if (!text || !*text)
    return false;
  char *end;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (*end || errno || v < 0 || v > INT_MAX)
    return false;
  value = static_cast<int>(v);
  return true;
}

std::string plural(long n, const char *word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

using Getenv = std::function<const char *(const char *)>;

/// An srun job step of several ranks must give MPI a process-management
/// interface (PMIx or PMI-2), or MPI_Init cannot connect the ranks (srun's
/// default, --mpi=none, gives none).
Status checkSlurmPmi(const Getenv &getenv) {
  if (getenv("PMIX_RANK") || getenv("PMI_FD") || getenv("PMI_RANK"))
    return Status::success();
  const char *type = getenv("SLURM_MPI_TYPE");
  return Status::failure(
      std::string("srun started this rank without a process-management "
                  "interface for MPI (") +
      (type ? std::string("SLURM_MPI_TYPE=") + type
            : std::string("no PMIX_RANK or PMI_FD")) +
      "), so MPI cannot connect the ranks: run srun --mpi=pmix smprun ... "
      "(`srun --mpi=list` shows what this Slurm offers), or start the ranks "
      "with mpirun -n N smprun ... (docs/launchers.md)");
}

/// torchrun and Kubernetes training operators set RANK and WORLD_SIZE (and
/// LOCAL_RANK, MASTER_ADDR, MASTER_PORT) but start no MPI: one rank runs,
/// several are refused with the launchers that work.
Status detectTorchrun(const Getenv &getenv, LaunchInfo &out) {
  const char *rank = getenv("RANK"), *size = getenv("WORLD_SIZE");
  // Both, as torchrun sets them: RANK alone is too common a name.
  if (!rank || !size)
    return Status::success();
  LaunchInfo info;
  if (!parseCount(rank, info.rank))
    return Status::failure(std::string("RANK='") + rank + "' is not a rank");
  if (!parseCount(size, info.size) || info.size < 1)
    return Status::failure(std::string("WORLD_SIZE='") + size +
                           "' is not a number of ranks");
  if (info.rank >= info.size)
    return Status::failure(std::string("RANK=") + rank +
                           " is not below WORLD_SIZE=" + size);
  if (const char *local = getenv("LOCAL_RANK");
      local && !parseCount(local, info.localRank))
    return Status::failure(std::string("LOCAL_RANK='") + local +
                           "' is not a rank");
  if (info.size > 1) {
    const char *addr = getenv("MASTER_ADDR");
    return Status::failure(
        "started by torchrun or a training operator (RANK=" +
        std::string(rank) + ", WORLD_SIZE=" + size +
        (addr ? std::string(", MASTER_ADDR=") + addr : std::string()) +
        "), which starts no MPI, and smprun's ranks talk through MPI: "
        "launch the " +
        plural(info.size, "rank") + " with smprun -n " + size +
        " (one machine), mpirun -n " + size +
        " smprun ... or srun "
        "--mpi=pmix smprun ... (Slurm); on Kubernetes use an MPI job "
        "(MPIJob) (docs/launchers.md)");
  }
  info.launcher = "torchrun";
  out = info;
  return Status::success();
}

} // namespace

/// Ranks started through PMI-1/PMI-2 alone need an MPI that speaks it.
Status checkPmi(const Getenv &getenv, const MpiTraits &mpi) {
  if (mpi.pmi || getenv("PMIX_RANK") ||
      !(getenv("PMI_FD") || getenv("PMI_RANK")))
    return Status::success();
  const char *type = getenv("SLURM_MPI_TYPE");
  return Status::failure(
      std::string("this rank was started through PMI-1/PMI-2 (") +
      (type ? std::string("SLURM_MPI_TYPE=") + type
            : std::string("PMI_RANK or PMI_FD set, no PMIX_RANK")) +
      "), which this smprun's MPI (" + mpi.name +
      ", built without PMI-1/PMI-2 support) cannot connect through: under "
      "Slurm run srun --mpi=pmix smprun ..., otherwise mpirun -n N smprun "
      "... (docs/launchers.md)");
}

Status detectLaunch(const std::function<const char *(const char *)> &getenv,
                    LaunchInfo &out, const MpiTraits &mpi) {
  out = LaunchInfo();
  struct Source {
    const char *launcher, *rank, *size, *localSize, *localRank;
  };
  const Source sources[] = {
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
       "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS", "MPI_LOCALRANKID"},
      {"slurm", "SLURM_PROCID",
       getenv("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS",
       nullptr, "SLURM_LOCALID"},
  };
  for (const Source &src : sources) {
    const char *rank = getenv(src.rank);
    if (!rank)
      continue;
    // A batch script has SLURM_PROCID too, but it is not a launched rank.
    if (std::strcmp(src.launcher, "slurm") == 0 && !getenv("SLURM_STEP_ID"))
      continue;
    const char *size = getenv(src.size);
    if (!size)
      return Status::failure(std::string(src.rank) + " is set but " + src.size +
                             " is not: cannot tell the run's size");
    if (!parseCount(rank, out.rank))
      return Status::failure(std::string(src.rank) + "='" + rank +
                             "' is not a rank");
    if (!parseCount(size, out.size) || out.size < 1)
      return Status::failure(std::string(src.size) + "='" + size +
                             "' is not a number of ranks");
    if (out.rank >= out.size)
      return Status::failure(std::string(src.rank) + "=" + rank +
                             " is not below " + src.size + "=" + size);
    const char *local = src.localSize ? getenv(src.localSize) : nullptr;
    if (local && (!parseCount(local, out.localSize) || out.localSize < 1 ||
                  out.localSize > out.size))
      return Status::failure(std::string(src.localSize) + "='" + local +
                             "' is not a number of ranks up to " + size);
    const char *localRank = getenv(src.localRank);
    if (localRank && !parseCount(localRank, out.localRank))
      return Status::failure(std::string(src.localRank) + "='" + localRank +
                             "' is not a rank");
    out.launcher = src.launcher;
    if (out.size > 1 && out.launcher == "slurm")
      if (Status s = checkSlurmPmi(getenv); !s.ok())
        return s;
    if (out.size > 1 && out.launcher != "openmpi")
      return checkPmi(getenv, mpi);
    return Status::success();
  }
  return detectTorchrun(getenv, out);
}

Status detectLaunch(LaunchInfo &out) {
  return detectLaunch([](const char *name) { return std::getenv(name); }, out,
                      mpiTraits());
}

Status createCommunicator(const LaunchInfo &launch, const MpiOptions &options,
                          std::unique_ptr<Communicator> &out) {
  if (launch.size <= 1) {
    out = makeLocalCommunicator();
    return Status::success();
  }
  std::unique_ptr<MpiCommunicator> mpi;
  MpiOptions withRank = options;
  withRank.launchRank = launch.rank; // for the start-up watchdog's message
  withRank.launchSize = launch.size;
  Status s = MpiCommunicator::create(withRank, mpi);
  if (!s.ok())
    return s;
  if (mpi->rank() != launch.rank || mpi->size() != launch.size)
    return Status::failure(
        "the launcher (" + launch.launcher + ") says rank " +
        std::to_string(launch.rank) + " of " + std::to_string(launch.size) +
        " but MPI says rank " + std::to_string(mpi->rank()) + " of " +
        std::to_string(mpi->size()) +
        " (is this smprun's MPI the one the launcher belongs to?)");
  out = std::move(mpi);
  return Status::success();
}

Status checkRankCount(const std::string &model, uint32_t compiledRanks,
                      int launchedRanks) {
  if (compiledRanks == static_cast<uint32_t>(launchedRanks))
    return Status::success();
  return Status::failure(
      model + ": compiled for " + plural(compiledRanks, "rank") +
      " but launched with " + std::to_string(launchedRanks) +
      "; run it with "
      "smprun -n " +
      std::to_string(compiledRanks) + ", or recompile it for " +
      plural(launchedRanks, "rank"));
}

int threadsPerRank(int cores, int localRanks) {
  return std::max(1, cores / std::max(1, localRanks));
}

std::vector<std::string> mpirunCommand(const std::string &mpirun, int ranks,
                                       const std::string &self,
                                       const std::vector<std::string> &args) {
  std::vector<std::string> cmd = {
      mpirun, "-n", std::to_string(ranks), "--oversubscribe", "--bind-to",
      "none", self};
  cmd.insert(cmd.end(), args.begin(), args.end());
  return cmd;
}

namespace {

volatile sig_atomic_t gRelayed = 0;  // the signals this process got
volatile sig_atomic_t gFirstSignal = 0;

void onRelaySignal(int sig) {
  if (gFirstSignal == 0)
    gFirstSignal = sig;
  gRelayed = gRelayed + 1;
}

/// A private directory for this mpirun's session files, removed after it:
/// Open MPI 4 keeps every job of a user under one shared
/// `$TMPDIR/ompi.HOST.UID`, which a finishing job may remove while another
/// creates its own inside it (seen as `orte_init failed: A call to mkdir
/// was unable to create the desired directory` when two `smprun -n` ran at
/// once). A user's own OMPI_MCA_orte_tmpdir_base is left alone.
class SessionDir {
public:
  SessionDir() {
    if (std::getenv("OMPI_MCA_orte_tmpdir_base"))
      return;
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/smprun.XXXXXX";
    if (!::mkdtemp(pattern.data()))
      return; // Open MPI's default then
    dir_ = pattern;
    ::setenv("OMPI_MCA_orte_tmpdir_base", dir_.c_str(), 1);
    ::setenv("PRTE_MCA_prte_tmpdir_base", dir_.c_str(), 0); // Open MPI 5
  }
  ~SessionDir() {
    if (dir_.empty())
      return;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    ::unsetenv("OMPI_MCA_orte_tmpdir_base");
  }
  SessionDir(const SessionDir &) = delete;
  SessionDir &operator=(const SessionDir &) = delete;

private:
  std::string dir_;
};

} // namespace

Status runMpirun(int ranks, const std::vector<std::string> &args,
                 bool stoppable, int &exitCode) {
  SessionDir session;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0)
    return Status::failure("cannot find this executable (/proc/self/exe): " +
                           std::string(std::strerror(errno)));
  self[n] = 0;
  const char *mpirun = std::getenv("SMP_MPIRUN");
  if (!mpirun || !*mpirun)
    mpirun = "mpirun";
  if (::geteuid() == 0) {
    // Open MPI refuses to run as root unless told twice.
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  }
  std::vector<std::string> cmd = mpirunCommand(mpirun, ranks, self, args);
  std::vector<char *> argv;
  for (std::string &a : cmd)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  // The handlers first: a signal between fork and waitpid is relayed too.
  struct sigaction sa = {};
  sa.sa_handler = onRelaySignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM})
    ::sigaction(sig, &sa, nullptr);
  // The child tells an exec failure through a close-on-exec pipe.
  int pipeFds[2];
  if (::pipe2(pipeFds, O_CLOEXEC) != 0)
    return Status::failure(std::string("cannot start mpirun: pipe: ") +
                           std::strerror(errno));
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child < 0)
    return Status::failure(std::string("cannot start mpirun: fork: ") +
                           std::strerror(errno));
  if (child == 0) {
    ::close(pipeFds[0]);
    ::setpgid(0, 0);
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM})
      ::sigaction(sig, &dfl, nullptr);
    ::execvp(argv[0], argv.data());
    int err = errno;
    (void)!::write(pipeFds[1], &err, sizeof(err));
    ::_exit(127);
  }
  ::setpgid(child, child); // either side may run first
  ::close(pipeFds[1]);
  int err = 0;
  ssize_t got;
  while ((got = ::read(pipeFds[0], &err, sizeof(err))) < 0 && errno == EINTR)
    ;
  ::close(pipeFds[0]);
  if (got == static_cast<ssize_t>(sizeof(err))) {
    ::waitpid(child, nullptr, 0);
    return Status::failure(std::string("cannot run ") + mpirun + ": " +
                           std::strerror(err) +
                           " (smprun -n needs Open MPI's mpirun: install "
                           "openmpi-bin, or set SMP_MPIRUN)");
  }
  int relayed = 0, status = 0;
  for (;;) {
    while (relayed < gRelayed) {
      ++relayed;
      int sig = stoppable && relayed == 1 ? SIGUSR1 : SIGTERM;
      if (stoppable && relayed == 1) {
        const char *msg = "smprun: the ranks stop after their current step "
                          "(and save a checkpoint with --checkpoint-dir); a "
                          "second signal aborts\n";
        (void)!::write(2, msg, std::strlen(msg));
      }
      ::kill(child, sig);
    }
    // Polled: a signal that lands between the relay and a blocking wait
    // would otherwise wait for mpirun's exit.
    pid_t w = ::waitpid(child, &status, WNOHANG);
    if (w == child)
      break;
    if (w < 0 && errno != EINTR)
      return Status::failure(std::string("waiting for mpirun: ") +
                             std::strerror(errno));
    ::usleep(20000);
  }
  exitCode = WIFEXITED(status) ? WEXITSTATUS(status)
                               : 128 + WTERMSIG(status);
  if (gFirstSignal != 0 && stoppable && exitCode == 128 + SIGUSR1)
    exitCode = 128 + gFirstSignal;
  return Status::success();
}

} // namespace smprt
