//===- MpiCommTest.cpp - MpiCommunicator on several ranks -----------------===//
//
// Run under mpirun (ctest does: 4 ranks, --oversubscribe):
//
//   smp-comm-mpi-test collectives
//       Every collective with exact expected values (each rank computes what
//       every other rank contributed), also through the chunked paths, and
//       the argument errors. Rank 0 prints "passed: N checks on R ranks";
//       any failure prints "rank R: FAILED ..." and exits 1.
//   smp-comm-mpi-test groups
//       On 4 ranks: createGroup (the pairs {0,1} {0,2} {1,3} {2,3}, every
//       rank alone, all ranks in reverse order, groups of that group) with
//       collectives and messages inside the groups; then postSend in a
//       pipeline pattern where every rank posts to both neighbours before it
//       receives anything (messages over 1 MiB, chunked ones), and the
//       release of completed sends. Prints like collectives.
//   smp-comm-mpi-test peer-exits --timeout S
//       Rank 1 exits with status 3 before the first all-reduce; the others
//       wait in it and must end non-zero, naming it.
//   smp-comm-mpi-test peer-hangs --timeout S
//       Rank 1 sleeps through the all-reduce; the others time out after S s.
//
//===----------------------------------------------------------------------===//


#include "MpiTestCheck.h"

#include <chrono>
#include <thread>
#include <unistd.h>

using namespace smprt;
using namespace mpitest;

namespace {

/// Sums the failures over the ranks; rank 0 reports. The exit status.
int finish(MpiCommunicator &comm, const std::string &detail) {
  int32_t failures = gFailures;
  Status s = comm.allReduce(&failures, 1, DType::I32, ReduceOp::Sum,
                            "the failure count");
  if (!s.ok() || failures != 0) {
    if (gRank == 0)
      std::fprintf(stderr, "%d checks failed: %s\n", failures, s.error.c_str());
    return 1;
  }
  if (gRank == 0)
    std::printf("passed: %d checks on %d ranks%s\n", gChecks, gSize,
                detail.c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  MpiOptions options;
  options.program = "smp-comm-mpi-test";
  for (int i = 2; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--timeout")
      options.timeoutSeconds = std::atof(argv[i + 1]);
  std::unique_ptr<MpiCommunicator> comm;
  Status s = MpiCommunicator::create(options, comm);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.error.c_str());
    return 1;
  }
  gRank = comm->rank();
  gSize = comm->size();
  if (mode == "collectives") {
    if (gSize < 2) {
      std::fprintf(stderr, "run me on at least 2 ranks\n");
      return 1;
    }
    runCollectiveTests(*comm);
    int before = gChecks;
    // Again through the chunked paths: 64-byte MPI calls.
    comm->setMaxChunkBytes(64);
    runCollectiveTests(*comm);
    comm->setMaxChunkBytes(size_t(1) << 30);
    return finish(*comm, " (" + std::to_string(gChecks - before) +
                             " of them chunked)");
  }
  if (mode == "groups") {
    if (gSize != 4) {
      std::fprintf(stderr, "run me on 4 ranks\n");
      return 1;
    }
    testGroups(*comm);
    testPipeline(*comm);
    return finish(*comm, "");
  }
  if (mode == "peer-exits" || mode == "peer-hangs") {
    if (gRank == 1) {
      // Late enough that the others already wait in the all-reduce.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (mode == "peer-exits")
        ::_exit(3);
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 0;
    }
    std::vector<float> grads(1000, 1.0f);
    s = comm->allReduce(grads.data(), grads.size(), DType::F32, ReduceOp::Sum,
                        "all_reduce of the gradients of 'wte.weight' "
                        "(instruction 412, node '/lm_head/MatMul')");
    std::fprintf(stderr, "rank %d: the all-reduce returned (%s)\n", gRank,
                 s.ok() ? "ok" : s.error.c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: smp-comm-mpi-test collectives | groups | "
                       "peer-exits | peer-hangs [--timeout S]\n");
  return 2;
}
