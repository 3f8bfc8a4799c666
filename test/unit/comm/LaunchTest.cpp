//===- LaunchTest.cpp - Rank discovery, rank counts, mpirun command -------===//

#include "smprt/comm/Launch.h"

#include <gtest/gtest.h>

#include <map>

using namespace smprt;

namespace {

using Env = std::map<std::string, std::string>;

/// detectLaunch over a made-up environment (by default with an MPI that
/// connects through every process-management interface).
Status detect(const Env &env, LaunchInfo &out,
              const MpiTraits &mpi = MpiTraits()) {
  return detectLaunch(
      [&](const char *name) -> const char * {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      out, mpi);
}

/// The launch detected in a made-up environment that must be accepted.
LaunchInfo detected(const Env &env) {
  LaunchInfo l;
  Status s = detect(env, l);
  EXPECT_TRUE(s.ok()) << s.error;
  return l;
}

/// `l` is rank `rank` of `size` started by `launcher`, local rank
/// `localRank` of `localSize` on its machine.
void expectLaunch(const LaunchInfo &l, const std::string &launcher, int rank,
                  int size, int localRank, int localSize) {
  EXPECT_EQ(l.launcher, launcher);
  EXPECT_EQ(l.rank, rank);
  EXPECT_EQ(l.size, size);
  EXPECT_EQ(l.localRank, localRank);
  EXPECT_EQ(l.localSize, localSize);
}

TEST(Launch, NoLauncherIsOneRank) {
  LaunchInfo l;
  ASSERT_TRUE(detect({{"HOME", "/root"}}, l).ok());
  EXPECT_FALSE(l.underLauncher());
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.size, 1);
  EXPECT_EQ(l.localSize, 0);
}

TEST(Launch, OpenMpi) {
  expectLaunch(detected({{"OMPI_COMM_WORLD_RANK", "3"},
                         {"OMPI_COMM_WORLD_SIZE", "8"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "3"},
                         // Open MPI wins over what else is set.
                         {"PMI_RANK", "0"},
                         {"PMI_SIZE", "2"}}),
               "openmpi", /*rank=*/3, /*size=*/8, /*localRank=*/3,
               /*localSize=*/4);
}

TEST(Launch, Pmi) {
  expectLaunch(detected({{"PMI_RANK", "1"},
                         {"PMI_SIZE", "2"},
                         {"MPI_LOCALNRANKS", "2"},
                         {"MPI_LOCALRANKID", "1"}}),
               "pmi", /*rank=*/1, /*size=*/2, /*localRank=*/1,
               /*localSize=*/2);
  LaunchInfo l;
  Status bad = detect({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"},
                       {"MPI_LOCALRANKID", "x"}},
                      l);
  EXPECT_EQ(bad.error, "MPI_LOCALRANKID='x' is not a rank");
}

TEST(Launch, SlurmStepsOnly) {
  LaunchInfo l;
  // A batch script: SLURM_PROCID without a step is not a launched rank.
  ASSERT_TRUE(
      detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}, l).ok());
  EXPECT_FALSE(l.underLauncher());
  ASSERT_TRUE(detect({{"SLURM_PROCID", "2"},
                      {"SLURM_NTASKS", "16"},
                      {"SLURM_STEP_NUM_TASKS", "4"},
                      {"SLURM_STEP_ID", "0"},
                      {"PMIX_RANK", "2"}},
                     l)
                  .ok());
  EXPECT_EQ(l.launcher, "slurm");
  EXPECT_EQ(l.rank, 2);
  EXPECT_EQ(l.size, 4);
  ASSERT_TRUE(detect({{"SLURM_PROCID", "2"},
                      {"SLURM_NTASKS", "3"},
                      {"SLURM_STEP_ID", "1"},
                      {"PMI_FD", "5"}},
                     l)
                  .ok());
  EXPECT_EQ(l.size, 3);
}

TEST(Launch, SlurmWithoutPmi) {
  // srun's default --mpi=none: MPI_Init could not connect the ranks.
  LaunchInfo l;
  Status s = detect({{"SLURM_PROCID", "1"},
                     {"SLURM_NTASKS", "4"},
                     {"SLURM_STEP_ID", "0"},
                     {"SLURM_MPI_TYPE", "none"}},
                    l);
  EXPECT_EQ(s.error,
            "srun started this rank without a process-management interface "
            "for MPI (SLURM_MPI_TYPE=none), so MPI cannot connect the ranks: "
            "run srun --mpi=pmix smprun ... (`srun --mpi=list` shows what "
            "this Slurm offers), or start the ranks with mpirun -n N smprun "
            "... (docs/launchers.md)");
  // One task needs no PMI: it never initializes MPI.
  ASSERT_TRUE(detect({{"SLURM_PROCID", "0"},
                      {"SLURM_NTASKS", "1"},
                      {"SLURM_STEP_ID", "0"}},
                     l)
                  .ok());
  EXPECT_EQ(l.size, 1);
}

TEST(Launch, TorchrunEnvironment) {
  LaunchInfo l;
  // One rank runs (LOCAL_RANK picks its GPU).
  ASSERT_TRUE(detect({{"RANK", "0"},
                      {"WORLD_SIZE", "1"},
                      {"LOCAL_RANK", "0"},
                      {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", "29500"}},
                     l)
                  .ok());
  EXPECT_EQ(l.launcher, "torchrun");
  EXPECT_EQ(l.size, 1);
  // Several: refused, naming the launchers that work.
  Status s = detect({{"RANK", "1"},
                     {"WORLD_SIZE", "4"},
                     {"LOCAL_RANK", "1"},
                     {"MASTER_ADDR", "10.0.0.1"},
                     {"MASTER_PORT", "29500"}},
                    l);
  EXPECT_EQ(s.error,
            "started by torchrun or a training operator (RANK=1, "
            "WORLD_SIZE=4, MASTER_ADDR=10.0.0.1), which starts no MPI, and "
            "smprun's ranks talk through MPI: launch the 4 ranks with smprun "
            "-n 4 (one machine), mpirun -n 4 smprun ... or srun --mpi=pmix "
            "smprun ... (Slurm); on Kubernetes use an MPI job (MPIJob) "
            "(docs/launchers.md)");
  // An MPI launcher's variables win over RANK/WORLD_SIZE.
  ASSERT_TRUE(detect({{"OMPI_COMM_WORLD_RANK", "1"},
                      {"OMPI_COMM_WORLD_SIZE", "4"},
                      {"RANK", "1"},
                      {"WORLD_SIZE", "4"}},
                     l)
                  .ok());
  EXPECT_EQ(l.launcher, "openmpi");
  // RANK alone is not a launch (too common a name).
  ASSERT_TRUE(detect({{"RANK", "3"}}, l).ok());
  EXPECT_FALSE(l.underLauncher());
  EXPECT_EQ(detect({{"RANK", "4"}, {"WORLD_SIZE", "4"}}, l).error,
            "RANK=4 is not below WORLD_SIZE=4");
  EXPECT_EQ(detect({{"RANK", "0"}, {"WORLD_SIZE", "x"}}, l).error,
            "WORLD_SIZE='x' is not a number of ranks");
}

TEST(Launch, BadEnvironments) {
  LaunchInfo l;
  EXPECT_EQ(detect({{"OMPI_COMM_WORLD_RANK", "0"}}, l).error,
            "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not: "
            "cannot tell the run's size");
  EXPECT_EQ(detect({{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}}, l).error,
            "PMI_RANK='x' is not a rank");
  EXPECT_EQ(detect({{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}}, l).error,
            "PMI_SIZE='0' is not a number of ranks");
  EXPECT_EQ(detect({{"PMI_RANK", "-1"}, {"PMI_SIZE", "2"}}, l).error,
            "PMI_RANK='-1' is not a rank");
  EXPECT_EQ(detect({{"OMPI_COMM_WORLD_RANK", "2"},
                    {"OMPI_COMM_WORLD_SIZE", "2"}},
                   l)
                .error,
            "OMPI_COMM_WORLD_RANK=2 is not below OMPI_COMM_WORLD_SIZE=2");
  EXPECT_EQ(detect({{"OMPI_COMM_WORLD_RANK", "0"},
                    {"OMPI_COMM_WORLD_SIZE", "2"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}},
                   l)
                .error,
            "OMPI_COMM_WORLD_LOCAL_SIZE='3' is not a number of ranks up to 2");
}

TEST(Launch, OneRankNeedsNoMpi) {
  // A launcher that started one rank: no MPI_Init, a LocalCommunicator.
  LaunchInfo l;
  l.launcher = "openmpi";
  std::unique_ptr<Communicator> c;
  ASSERT_TRUE(createCommunicator(l, MpiOptions(), c).ok());
  EXPECT_STREQ(c->backend(), "local");
  EXPECT_EQ(c->size(), 1);
}

TEST(Launch, RankCounts) {
  EXPECT_TRUE(checkRankCount("m.smpx", 2, 2).ok());
  EXPECT_EQ(checkRankCount("m.smpx", 4, 2).error,
            "m.smpx: compiled for 4 ranks but launched with 2; run it with "
            "smprun -n 4, or recompile it for 2 ranks");
  EXPECT_EQ(checkRankCount("m.smpx", 1, 2).error,
            "m.smpx: compiled for 1 rank but launched with 2; run it with "
            "smprun -n 1, or recompile it for 2 ranks");
  EXPECT_EQ(checkRankCount("m.smpx", 2, 1).error,
            "m.smpx: compiled for 2 ranks but launched with 1; run it with "
            "smprun -n 2, or recompile it for 1 rank");
}

TEST(Launch, ThreadsPerRank) {
  EXPECT_EQ(threadsPerRank(16, 4), 4);
  EXPECT_EQ(threadsPerRank(16, 3), 5);
  EXPECT_EQ(threadsPerRank(2, 4), 1);
  EXPECT_EQ(threadsPerRank(8, 0), 8);
  EXPECT_EQ(threadsPerRank(0, 1), 1);
}

TEST(Launch, MpirunCommand) {
  EXPECT_EQ(mpirunCommand("mpirun", 4, "/opt/smp/bin/smprun",
                          {"m.smpx", "--data", "d", "--steps", "5"}),
            (std::vector<std::string>{"mpirun", "-n", "4", "--oversubscribe",
                                      "--bind-to", "none",
                                      "/opt/smp/bin/smprun", "m.smpx",
                                      "--data", "d", "--steps", "5"}));
}

} // namespace

/// detectLaunch with an MPI that cannot use PMI-1/PMI-2 (Debian's Open MPI).
Status detectPmixOnly(const Env &env, LaunchInfo &out) {
  MpiTraits mpi;
  mpi.name = "Open MPI 4.1.4";
  mpi.pmi = false;
  return detect(env, out, mpi);
}

TEST(Launch, Pmi2WithAnMpiWithoutItIsRefused) {
  // What srun --mpi=pmi2 sets (PMI_RANK wins over SLURM_PROCID).
  std::map<std::string, std::string> env = {
      {"PMI_RANK", "1"},       {"PMI_SIZE", "2"},      {"PMI_FD", "7"},
      {"SLURM_PROCID", "1"},   {"SLURM_NTASKS", "2"},  {"SLURM_STEP_ID", "0"},
      {"SLURM_MPI_TYPE", "pmi2"}};
  LaunchInfo l;
  Status s = detectPmixOnly(env, l);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error,
            "this rank was started through PMI-1/PMI-2 (SLURM_MPI_TYPE=pmi2), "
            "which this smprun's MPI (Open MPI 4.1.4, built without "
            "PMI-1/PMI-2 support) cannot connect through: under Slurm run "
            "srun --mpi=pmix smprun ..., otherwise mpirun -n N smprun ... "
            "(docs/launchers.md)");
  // An MPI that speaks PMI-2 runs it.
  EXPECT_TRUE(detect(env, l).ok());
  EXPECT_EQ(l.rank, 1);
  // PMIx alongside (srun --mpi=pmix) runs; one rank never needs MPI.
  env["PMIX_RANK"] = "1";
  EXPECT_TRUE(detectPmixOnly(env, l).ok());
  EXPECT_TRUE(detectPmixOnly({{"PMI_RANK", "0"}, {"PMI_SIZE", "1"},
                              {"PMI_FD", "7"}},
                             l)
                  .ok());
  // Open MPI's own mpirun is never refused.
  EXPECT_TRUE(detectPmixOnly({{"OMPI_COMM_WORLD_RANK", "0"},
                              {"OMPI_COMM_WORLD_SIZE", "2"},
                              {"PMI_FD", "7"}},
                             l)
                  .ok());
}

TEST(Launch, ThisMpiIsDescribed) {
  MpiTraits t = mpiTraits();
  EXPECT_FALSE(t.name.empty());
}
