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
// Start-up and shut-down are bounded too. MPI_Init_thread, the first
// collectives of create() (MPI_Comm_dup, MPI_Comm_split_type), the
// MPI_Comm_create_group of createGroup and MPI_Finalize block and cannot
// be polled, so a watchdog thread is armed around each (BlockingDeadline):
// when the call has not returned within the timeout it prints
//
//   <program>: error: rank R: timed out after T s in MPI start-up (rank R
//   of N; MPI_Init waits for every rank of the run: a rank did not start or
//   is stopped, or the launcher's network is unreachable)
//
// (or names the group / MPI_Finalize) and ends the process with _exit(1);
// the launcher then ends the other ranks. A SIGTERM during start-up is
// reported as for an operation ("stopped by the launcher in MPI start-up").
// For tests, SMP_FAULT_STALL_STARTUP_RANK=R makes rank R (the launcher's
// rank) sleep before MPI_Init_thread, as a rank that never starts would.
//
// Counts larger than maxChunkBytes (1 GiB) are split into several MPI calls
// (MPI counts are ints). The sender's and the receiver's maxChunkBytes must
// agree; a postSend is split by the value at the time it is posted.
//
// createGroup is MPI_Comm_group + MPI_Group_incl + MPI_Comm_create_group
// (tag 0) on this communicator's MPI communicator: it blocks until the
// group's other members call it, bounded by a watchdog thread (see
// start-up above; SIGTERM still reports it). A group inherits the timeout, the
// program name and maxChunkBytes (later changes to either communicator
// apply to that one only), reports rank() and size() within the group and
// the localSize() of the communicator it was made from, and frees its MPI
// communicator when it is destroyed (after MPI_Finalize it frees only its
// memory); only the communicator made by create() finalizes MPI. In
// the watchdog's message and in "MPI error on rank R", R is the rank in
// MPI_COMM_WORLD, the process mpirun names; elsewhere ranks are the
// group's.
//
// postSend copies the message and posts it with MPI_Isend (chunked like
// send()); the copies live in the communicator until MPI_Testall finds
// their sends complete, which every postSend checks for the sends posted
// before it and completeSends waits for. A communicator destroyed with
// sends still pending gives them up to a second to complete, then warns on
// stderr and leaves their memory to MPI.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_COMM_MPICOMMUNICATOR_H
#define SMPRT_COMM_MPICOMMUNICATOR_H

#include "smprt/comm/Communicator.h"

#include <memory>
#include <string>

namespace smprt {

struct MpiOptions {
  double timeoutSeconds = 600;    // per operation; see the watchdog above
  std::string program = "smprun"; // the prefix of the watchdog's message
  size_t maxChunkBytes = size_t(1) << 30;
  /// The rank and size the launcher set, for the start-up watchdog's
  /// message (MPI cannot tell them before MPI_Init returns); -1: unknown.
  int launchRank = -1, launchSize = -1;
};

class MpiCommunicator final : public Communicator {
public:
  /// Initializes MPI (MPI_Init_thread, MPI_THREAD_FUNNELED: only the thread
  /// that created it may call it) and returns the communicator of
  /// MPI_COMM_WORLD. Only one may exist per process (its groups aside); MPI
  /// is finalized when it is destroyed.
  static Status create(const MpiOptions &options,
                       std::unique_ptr<MpiCommunicator> &out);
  ~MpiCommunicator() override;

  int rank() const override;
  int size() const override;
  int localSize() const override;
  const char *backend() const override { return "mpi"; }

  void setTimeout(double seconds);
  double timeout() const;
  double timeoutSeconds() const override { return timeout(); }
  /// For tests: exercises the chunked paths with small buffers.
  void setMaxChunkBytes(size_t bytes);
  /// For tests: the messages of postSend whose copies are still held.
  size_t pendingSends() const;

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
  Status postSend(const void *data, size_t bytes, int peer, int tag,
                  const std::string &what) override;
  Status completeSends(const std::string &what) override;
  Status createGroup(const std::vector<int> &ranks,
                     std::unique_ptr<Communicator> &out,
                     const std::string &what) override;
  Status barrier(const std::string &what) override;
  Status broadcast(void *data, size_t bytes, int root,
                   const std::string &what) override;
  [[noreturn]] void abort(int code) override;

  struct Impl;

private:
  MpiCommunicator();
  /// checkPeer, MPI's tag limit and checkBuffer: what a point-to-point call
  /// checks first.
  Status checkMessage(const void *data, size_t bytes, int peer, int tag,
                      const char *verb, const std::string &what) const;
  std::unique_ptr<Impl> impl_;
};

} // namespace smprt

#endif // SMPRT_COMM_MPICOMMUNICATOR_H
