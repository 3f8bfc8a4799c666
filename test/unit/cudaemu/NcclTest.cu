//===- NcclTest.cu - The CUDA emulator's NCCL across processes ------------===//
//
// CUDA source run through kernels/cudaemu: NCCL between two ranks, each a
// process with its own emulated device (smp-cudaemu-tests runs with
// SMP_CUDAEMU_DEVICES=2): collectives, a captured collective relaunched,
// a send that completes only once its receive is posted (and holds its
// stream, not the caller), two communicators' streams that go on apart
// (a pipeline's pipes), and what NCCL would hang on refused.
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "EmuTestUtil.h"

namespace {

using smp::emutest::deviceCopy;
using smp::emutest::hostCopy;

/// `body()` in a process of its own (an error it leaves in the CUDA
/// context stays there).
template <class Body> bool inChild(Body body) {
  pid_t child = fork();
  if (child == 0)
    _exit(body() ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// body(comms, rank) on two ranks of `n` communicators (made in order on
/// both): rank 0 here, rank 1 in a child process; true when both return
/// true.
template <class Body> bool onTwoRanksOf(int n, Body body) {
  std::vector<ncclUniqueId> ids(n);
  for (ncclUniqueId &id : ids)
    if (ncclGetUniqueId(&id) != ncclSuccess)
      return false;
  pid_t child = fork();
  int rank = child == 0 ? 1 : 0;
  cudaSetDevice(rank);
  std::vector<ncclComm_t> comms(n, nullptr);
  bool ok = true;
  for (int i = 0; i < n && ok; ++i)
    ok = ncclCommInitRank(&comms[i], 2, ids[i], rank) == ncclSuccess;
  ok = ok && body(comms, rank);
  for (ncclComm_t c : comms)
    ncclCommDestroy(c);
  if (child == 0)
    _exit(ok ? 0 : 1);
  int status = 0;
  waitpid(child, &status, 0);
  return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// body(comm, rank) on two ranks of one communicator.
template <class Body> bool onTwoRanks(Body body) {
  return onTwoRanksOf(1, [&](std::vector<ncclComm_t> &c, int rank) {
    return body(c[0], rank);
  });
}

/// NCCL between two processes: one emulated device each.
class CudaEmuNccl : public ::testing::Test {
protected:
  void SetUp() override {
    int devices = 0;
    cudaGetDeviceCount(&devices);
    if (devices < 2)
      GTEST_SKIP() << "needs SMP_CUDAEMU_DEVICES=2 (NCCL: one rank per GPU)";
  }
};

TEST_F(CudaEmuNccl, ReducesAndGathersAcrossProcesses) {
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    std::vector<float> mine = {1.0f + rank, 2.0f * rank, -1.0f, 0.5f};
    float *d = deviceCopy(mine), *all;
    cudaMalloc(&all, 8 * sizeof(float));
    bool ok =
        ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, comm, nullptr) ==
            ncclSuccess &&
        ncclAllGather(d, all, 4, ncclFloat32, comm, nullptr) == ncclSuccess;
    std::vector<float> h = hostCopy(all, 8);
    std::vector<float> want = {3, 2, -2, 1, 3, 2, -2, 1};
    return ok && h == want;
  }));
}

// An all-reduce on a captured stream is recorded, not run; each launch of
// the graph sums the ranks' buffers again (smprun --cuda-graph's
// collectives).
TEST_F(CudaEmuNccl, ACapturedAllReduceRunsAtEachLaunch) {
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    std::vector<float> mine = {1.0f + rank, 2.0f};
    float *d = deviceCopy(mine);
    cudaStream_t s = nullptr;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    bool ok =
        cudaStreamCreate(&s) == cudaSuccess &&
        cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) ==
            cudaSuccess &&
        ncclAllReduce(d, d, 2, ncclFloat32, ncclSum, comm, s) == ncclSuccess &&
        cudaStreamEndCapture(s, &graph) == cudaSuccess &&
        hostCopy(d, 2) == mine &&
        cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    for (float k : {1.0f, 2.0f})
      ok = ok && cudaGraphLaunch(exec, s) == cudaSuccess &&
           cudaStreamSynchronize(s) == cudaSuccess &&
           hostCopy(d, 2) == std::vector<float>{3 * k, 4 * k};
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
    cudaFree(d);
    return ok;
  }));
}

// A send completes once its receive is posted, as NCCL's larger than its
// buffers do: two ranks each sending to the other in a group of its own
// before receiving would hang on a GPU, and fail here (after
// SMP_CUDAEMU_NCCL_TIMEOUT, saying which receive was never posted); each
// pair in one group, or a send whose peer receives later on its own, goes
// through.
TEST_F(CudaEmuNccl, ASendWaitsForItsReceiveToBePosted) {
  // Each rank's send and receive in one group: they meet.
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    float *mine = deviceCopy(std::vector<float>{1.0f + rank});
    float *theirs = deviceCopy(std::vector<float>{0.0f});
    int peer = 1 - rank;
    bool ok =
        ncclGroupStart() == ncclSuccess &&
        ncclSend(mine, 1, ncclFloat32, peer, comm, nullptr) == ncclSuccess &&
        ncclRecv(theirs, 1, ncclFloat32, peer, comm, nullptr) == ncclSuccess &&
        ncclGroupEnd() == ncclSuccess;
    return ok && hostCopy(theirs, 1) == std::vector<float>{2.0f - rank};
  }));
  // Each rank's send alone, then its receive: a hang on a GPU, refused.
  // The sends return at once (a send's wait holds its stream, not the
  // caller); the synchronization finds the wait over: the communicator's
  // asynchronous error and the context's sticky one (in a process of its
  // own, which that error ends).
  EXPECT_FALSE(inChild([] {
    return onTwoRanks([](ncclComm_t comm, int rank) {
      setenv("SMP_CUDAEMU_NCCL_TIMEOUT", "1", 1);
      float *mine = deviceCopy(std::vector<float>{1.0f + rank});
      float *theirs = deviceCopy(std::vector<float>{0.0f});
      int peer = 1 - rank;
      EXPECT_EQ(ncclSend(mine, 1, ncclFloat32, peer, comm, nullptr),
                ncclSuccess);
      EXPECT_EQ(ncclRecv(theirs, 1, ncclFloat32, peer, comm, nullptr),
                ncclSuccess);
      if (cudaStreamSynchronize(nullptr) == cudaSuccess)
        return true;
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm, &state);
      std::string why = ncclGetLastError(comm);
      EXPECT_NE(state, ncclSuccess);
      EXPECT_NE(why.find("its receive never posted"), std::string::npos) << why;
      return false;
    });
  }));
  // One way: rank 0's send alone, rank 1's receive alone.
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    float *d = deviceCopy(std::vector<float>{rank == 0 ? 5.0f : 0.0f});
    ncclResult_t r = rank == 0 ? ncclSend(d, 1, ncclFloat32, 1, comm, nullptr)
                               : ncclRecv(d, 1, ncclFloat32, 0, comm, nullptr);
    return r == ncclSuccess && hostCopy(d, 1) == std::vector<float>{5.0f};
  }));
}

// A send alone holds its stream until its receive is posted, not the
// caller: rank 0 goes on (here: writes a file) while rank 1 posts its
// receive only once it sees that file; the synchronization then waits for
// the send. (When the send held the caller, rank 0 never wrote the file.)
TEST_F(CudaEmuNccl, ASendHoldsItsStreamNotTheCaller) {
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    setenv("SMP_CUDAEMU_NCCL_TIMEOUT", "20", 1);
    std::string flag = "/dev/shm/smp-cudaemu-test-" +
                       std::to_string(rank == 0 ? getpid() : getppid());
    float *d = deviceCopy(std::vector<float>{rank == 0 ? 7.0f : 0.0f});
    if (rank == 0) {
      bool ok = ncclSend(d, 1, ncclFloat32, 1, comm, nullptr) == ncclSuccess;
      std::FILE *f = std::fopen(flag.c_str(), "w");
      ok = ok && f && std::fclose(f) == 0;
      return ok && cudaStreamSynchronize(nullptr) == cudaSuccess;
    }
    for (int i = 0; i < 2000 && access(flag.c_str(), F_OK) != 0; ++i)
      usleep(10000);
    bool seen = access(flag.c_str(), F_OK) == 0;
    std::remove(flag.c_str());
    return seen &&
           ncclRecv(d, 1, ncclFloat32, 0, comm, nullptr) == ncclSuccess &&
           hostCopy(d, 1) == std::vector<float>{7.0f};
  }));
}

// Sends to one peer on a communicator and stream of their own go on while
// the host waits for a message on another, as on a GPU: rank 0 sends two
// messages and then receives two; rank 1 receives the first, sends, then
// receives the second, which rank 0's stream sends once rank 1 posted the
// first's receive, while rank 0's host waits for the second reply (1F1B's
// steady state on a communicator per direction). Before, every NCCL item
// of a process ran in issue order and a stream held by a send went on only
// when something needed it: both ranks waited until the timeout.
TEST_F(CudaEmuNccl, SendsOnTheirOwnStreamGoOnWhileTheHostWaits) {
  // A communicator a direction, as a pipeline's pair of ranks has: `to1`,
  // whose rank 0 sends to rank 1, and `to0` the other way.
  EXPECT_TRUE(onTwoRanksOf(2, [](std::vector<ncclComm_t> &comms, int rank) {
    ncclComm_t to1 = comms[0], to0 = comms[1];
    setenv("SMP_CUDAEMU_NCCL_TIMEOUT", "20", 1);
    cudaStream_t out = nullptr, in = nullptr; // rank 0's sends, its receives
    cudaStreamCreate(&out);
    cudaStreamCreate(&in);
    float *a = deviceCopy(std::vector<float>{rank == 0 ? 1.0f : 0.0f});
    float *b = deviceCopy(std::vector<float>{rank == 0 ? 2.0f : 0.0f});
    float *c = deviceCopy(std::vector<float>{rank == 1 ? 3.0f : 0.0f});
    float *d = deviceCopy(std::vector<float>{rank == 1 ? 4.0f : 0.0f});
    bool ok;
    if (rank == 0)
      ok = ncclSend(a, 1, ncclFloat32, 1, to1, out) == ncclSuccess &&
           ncclSend(b, 1, ncclFloat32, 1, to1, out) == ncclSuccess &&
           ncclRecv(c, 1, ncclFloat32, 1, to0, in) == ncclSuccess &&
           ncclRecv(d, 1, ncclFloat32, 1, to0, in) == ncclSuccess;
    else
      ok = ncclRecv(a, 1, ncclFloat32, 0, to1, out) == ncclSuccess &&
           ncclSend(c, 1, ncclFloat32, 0, to0, in) == ncclSuccess &&
           ncclRecv(b, 1, ncclFloat32, 0, to1, out) == ncclSuccess &&
           ncclSend(d, 1, ncclFloat32, 0, to0, in) == ncclSuccess;
    ok = ok && cudaStreamSynchronize(out) == cudaSuccess &&
         cudaStreamSynchronize(in) == cudaSuccess;
    for (auto [p, v] : {std::pair{a, 1.0f}, {b, 2.0f}, {c, 3.0f}, {d, 4.0f}})
      ok = ok && hostCopy(p, 1) == std::vector<float>{v};
    cudaStreamDestroy(out);
    cudaStreamDestroy(in);
    return ok;
  }));
}

TEST_F(CudaEmuNccl, RefusesMismatchedCollectivesAndOverlaps) {
  // Rank 1 reduces 5 elements where rank 0 reduces 4: NCCL would hang or
  // mix them up; both ranks are told.
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    float *d;
    cudaMalloc(&d, 8 * sizeof(float));
    return ncclAllReduce(d, d, 4 + rank, ncclFloat32, ncclSum, comm, nullptr) ==
           ncclInvalidUsage;
  }));
  // An all-gather whose send buffer overlaps its receive buffer elsewhere
  // than at this rank's slot.
  EXPECT_TRUE(onTwoRanks([](ncclComm_t comm, int rank) {
    float *d;
    cudaMalloc(&d, 8 * sizeof(float));
    float *send = d + 4 * rank + 1;
    return ncclAllGather(send, d, 3, ncclFloat32, comm, nullptr) ==
           ncclInvalidUsage;
  }));
}

} // namespace
