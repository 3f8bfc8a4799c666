//===- MpiCommunicator.h - Collectives over MPI -----------------*- C++ -*-===//
//
// Every operation is posted non-blocking (MPI_Iallreduce, MPI_Iallgather,
// MPI_Ireduce_scatter_block, MPI_Isend/MPI_Irecv, MPI_Ibarrier, MPI_Ibcast)
// and polled with MPI_Testall until it completes or its deadline passes. On
// expiry the rank prints
//
//   <program>: error: rank R: timed out after T s in <what> (a peer rank
//   died or hung)
//
// on stderr and calls MPI_Abort(MPI_COMM_WORLD, 1), so every rank of the run
// exits non-zero instead of hanging. The communicator works on a duplicate
// of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so MPI errors become a Status
// naming the operation. When the launcher stops the rank with SIGTERM (as
// mpirun does once another rank has exited with an error) while it waits in
// an operation, it prints which one before it dies.
//
// Results are deterministic: MPI_SUM over the same ranks and counts combines
// the values in an order fixed by the algorithm MPI picks for that size, and
// every rank receives the same bytes. That order is not rank 0 + rank 1 +
// ..., so an f32 sum over 4 ranks may differ in the last bit from one over 2
// ranks or from a single-rank run (tensor- and pipeline-parallel exactness
// against one rank will need a fixed reduction order).
//
// Counts larger than maxChunkBytes (1 GiB) are split into several MPI calls
// (MPI counts are ints).
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_MPICOMMUNICATOR_H
#define SMPRT_MPICOMMUNICATOR_H

#include "smprt/Communicator.h"

#include <memory>
#include <string>

namespace smprt {

struct MpiOptions {
  double timeoutSeconds = 600;  // per operation; see the watchdog above
  std::string program = "smprun"; // the prefix of the watchdog's message
  size_t maxChunkBytes = size_t(1) << 30;
};

class MpiCommunicator final : public Communicator {
public:
  /// Initializes MPI (MPI_Init_thread, MPI_THREAD_FUNNELED: only the thread
  /// that created it may call it) and returns the communicator of
  /// MPI_COMM_WORLD. Only one may exist per process; MPI is finalized when it
  /// is destroyed.
  static Status create(const MpiOptions &options,
                       std::unique_ptr<MpiCommunicator> &out);
  ~MpiCommunicator() override;

  int rank() const override;
  int size() const override;
  int localSize() const override;
  const char *backend() const override { return "mpi"; }

  void setTimeout(double seconds);
  double timeout() const;
  /// For tests: exercises the chunked paths with small buffers.
  void setMaxChunkBytes(size_t bytes);

  Status allReduce(void *data, size_t count, DType dtype, ReduceOp op,
                   const std::string &what) override;
  Status allGather(const void *send, void *recv, size_t countPerRank,
                   DType dtype, const std::string &what) override;
  Status reduceScatter(const void *send, void *recv, size_t countPerRank,
                       DType dtype, ReduceOp op,
                       const std::string &what) override;
  Status send(const void *data, size_t bytes, int peer, int tag,
              const std::string &what) override;
  Status recv(void *data, size_t bytes, int peer, int tag,
              const std::string &what) override;
  Status sendRecv(const void *sendData, size_t sendBytes, int dest,
                  void *recvData, size_t recvBytes, int source, int tag,
                  const std::string &what) override;
  Status barrier(const std::string &what) override;
  Status broadcast(void *data, size_t bytes, int root,
                   const std::string &what) override;
  [[noreturn]] void abort(int code) override;

  struct Impl;

private:
  MpiCommunicator();
  std::unique_ptr<Impl> impl_;
};

} // namespace smprt

#endif // SMPRT_MPICOMMUNICATOR_H
