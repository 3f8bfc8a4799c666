//===- Launch.h - Rank discovery and multi-rank launching -------*- C++ -*-===//
//
// A run of N ranks is N smprun processes. Either an external launcher
// starts them (mpirun, mpiexec, srun), and each process finds its rank and
// the run's size in the environment the launcher set, or `smprun -n N`
// starts them itself through a child process
//   mpirun -n N --oversubscribe --bind-to none <smprun> <the other arguments>
// Single-rank runs never initialize MPI.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_COMM_LAUNCH_H
#define SMPRT_COMM_LAUNCH_H

#include "smprt/comm/Communicator.h"
#include "smprt/comm/MpiCommunicator.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace smprt {

struct LaunchInfo {
  /// Who started this process: "" (no launcher: one rank), "openmpi", "pmi"
  /// (MPICH, Intel MPI), "slurm" or "torchrun" (one rank).
  std::string launcher;
  int rank = 0, size = 1;
  /// Ranks on this machine as the launcher tells; 0 when it does not.
  int localSize = 0;
  /// This rank's index among them (picks its GPU); 0 when not told.
  int localRank = 0;
  bool underLauncher() const { return !launcher.empty(); }
};

/// Reads the rank and size a launcher set, first found wins:
///   OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE (+ OMPI_COMM_WORLD_LOCAL_SIZE,
///   OMPI_COMM_WORLD_LOCAL_RANK)
///   PMI_RANK / PMI_SIZE (+ MPI_LOCALNRANKS, MPI_LOCALRANKID)
///   SLURM_PROCID / SLURM_STEP_NUM_TASKS or SLURM_NTASKS, inside an srun job
///   step only (SLURM_STEP_ID set: a batch script is not a launched rank;
///   + SLURM_LOCALID); with several ranks PMIX_RANK, PMI_FD or PMI_RANK
///   must be set too (srun --mpi=pmix), else an error says what to pass
///   (MPI_Init would fail without a hint)
///   RANK / WORLD_SIZE (+ LOCAL_RANK), as torchrun and Kubernetes training
///   operators set them ("torchrun"): one rank runs; several are an error
///   naming the launchers that work (they start no MPI)
/// Several ranks started through PMI-1/PMI-2 only (PMI_RANK or PMI_FD, no
/// PMIX_RANK: srun --mpi=pmi2, MPICH's mpiexec) are an error when this
/// smprun's MPI cannot connect through them (Open MPI talks PMIx only
/// unless built with PMI-1/PMI-2 support), naming what works instead.
/// Malformed or inconsistent values are an error naming the variable.
Status detectLaunch(LaunchInfo &out);

/// What the MPI smprun is linked with can connect ranks through.
struct MpiTraits {
  std::string name = "MPI"; // "Open MPI 4.1.4"
  /// PMI-1/PMI-2 (besides PMIx, and its own mpirun).
  bool pmi = true;
};
/// This smprun's MPI (Open MPI 4: whether its s1/s2 PMI components are
/// installed; Open MPI 5: never; others: yes). Does not initialize MPI.
MpiTraits mpiTraits();

/// detectLaunch with another environment and MPI (for tests).
Status detectLaunch(const std::function<const char *(const char *)> &getenv,
                    LaunchInfo &out, const MpiTraits &mpi = MpiTraits());

/// The communicator of this process: a local communicator when the run has
/// one rank (MPI is never initialized), otherwise an MpiCommunicator
/// (initializes MPI) whose rank and size must match `launch`.
Status createCommunicator(const LaunchInfo &launch, const MpiOptions &options,
                          std::unique_ptr<Communicator> &out);

/// "<model>: compiled for 4 ranks but launched with 2 ..." unless equal.
Status checkRankCount(const std::string &model, uint32_t compiledRanks,
                      int launchedRanks);

/// Kernel threads per rank: `cores` shared by `localRanks` ranks, at least 1.
int threadsPerRank(int cores, int localRanks);

/// The command line `smprun -n N` runs itself through: `mpirun`,
/// -n N --oversubscribe --bind-to none, `self`, then `args`.
std::vector<std::string> mpirunCommand(const std::string &mpirun, int ranks,
                                       const std::string &self,
                                       const std::vector<std::string> &args);

/// Runs mpirunCommand(...) for this executable (/proc/self/exe) as a child
/// process in its own process group and waits for it; mpirun is
/// $SMP_MPIRUN or `mpirun` on the PATH. As root it sets
/// OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 (unless
/// set), which Open MPI requires. `exitCode` is mpirun's exit status (128 +
/// the signal when a signal ended it). Fails only when mpirun cannot start.
///
/// Signals: Open MPI's mpirun answers SIGINT and SIGTERM by killing every
/// rank a second later, too soon for a rank to finish its step and save a
/// checkpoint; it forwards SIGUSR1 to the ranks instead. So mpirun runs in
/// its own process group (a terminal's Ctrl-C reaches only this process),
/// and a SIGINT or SIGTERM this process gets is relayed: with `stoppable`
/// (a training run, which stops cleanly on SIGUSR1) the first as SIGUSR1,
/// then as SIGTERM; otherwise as SIGTERM. When the ranks then exit with
/// 128 + SIGUSR1, `exitCode` is 128 + the signal this process got.
Status runMpirun(int ranks, const std::vector<std::string> &args,
                 bool stoppable, int &exitCode);

} // namespace smprt

#endif // SMPRT_COMM_LAUNCH_H
