//===- Communicator.h - Collectives between the ranks of a run --*- C++ -*-===//
//
// The runtime's only view of the other ranks. Kernel-table steps of the
// communication instructions ("all_reduce", "all_gather", "reduce_scatter",
// "send", "recv") call these methods on raw buffers of the arena; the trainer
// uses them to agree on checkpoints. Three implementations:
//
//   local  makeLocalCommunicator(): one rank. Reductions leave the data as
//          it is, gathers copy, send/recv/postSend are errors, its only
//          group is itself. Never touches MPI.
//   mpi    MpiCommunicator (smprt/comm/MpiCommunicator.h): every operation
//          non-blocking and polled against a deadline.
//   nccl   createNcclCommunicator (smprt/comm/NcclCommunicator.h, CUDA
//          builds): device buffers, queued on the backend's stream.
//
// Every call is collective over all ranks (send/recv/sendRecv: over the
// two ranks named; createGroup: over the group's members) and must be made
// in the same order on every rank. postSend and completeSends are local:
// postSend only posts a message (the peer's recv() takes it whenever it
// gets there) and completeSends waits for this rank's own posted messages.
// `what` names the operation for error messages, e.g. "all_reduce of the
// gradients of 'wte.weight' (instruction 412, node '/lm_head/MatMul')";
// errors read "<what>: <problem>".
//
// Tensor and pipeline parallelism work on sub-groups of the run:
// createGroup makes a communicator of some of the ranks (a tensor-parallel
// group of the ranks that share a layer's weights, the two ranks of a
// pipeline boundary), whose collectives run over its members only and whose
// ranks are numbered 0 .. size()-1 in the order the group was given. A
// pipeline stage sends its activations with postSend, which returns at once
// whatever the message's size: a stage that posts its output before it
// receives from the next stage cannot deadlock against that stage doing the
// same (with send() both would wait for the other's recv()).
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_COMM_COMMUNICATOR_H
#define SMPRT_COMM_COMMUNICATOR_H

#include "smprt/Base.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace smprt {

/// How allReduce/reduceScatter combine the ranks' values. Mean is the sum
/// divided by size() (float dtypes only).
enum class ReduceOp : uint8_t { Sum, Max, Min, Mean };

/// "sum", "max", "min", "mean".
const char *reduceOpName(ReduceOp op);

/// Parses reduceOpName's spellings (for instruction attributes).
bool parseReduceOp(const std::string &name, ReduceOp &op);

class Communicator {
public:
  virtual ~Communicator();

  /// This process's rank, 0 <= rank() < size().
  virtual int rank() const = 0;
  /// Ranks in the run.
  virtual int size() const = 0;
  /// Ranks of the run on this machine (for the threads per rank).
  virtual int localSize() const = 0;
  /// "local" or "mpi".
  virtual const char *backend() const = 0;
  /// The deadline, in seconds, this communicator puts on each blocking
  /// operation (smprun --timeout); 0 when it puts none (one local rank,
  /// which never waits for another). A device communicator made on top of
  /// this one (NCCL) takes it, so its start-up is bounded like MPI's.
  virtual double timeoutSeconds() const { return 0; }

  /// Reduces `count` elements at `data` over all ranks, in place; every rank
  /// gets the same bytes. Float dtypes: Sum, Max, Min, Mean; f16/bf16 are
  /// reduced in f32 and rounded once. Integer dtypes: Sum, Max, Min (Sum
  /// wraps). Bool: Max (any) and Min (all).
  virtual Status allReduce(void *data, size_t count, DType dtype, ReduceOp op,
                           const std::string &what) = 0;

  /// Concatenates every rank's `countPerRank` elements at `send` into `recv`
  /// (size() * countPerRank elements, rank 0's first). `send` may be this
  /// rank's own slot of `recv` (in place).
  virtual Status allGather(const void *send, void *recv, size_t countPerRank,
                           DType dtype, const std::string &what) = 0;

  /// Reduces `send` (size() * countPerRank elements) over all ranks, like
  /// allReduce, and leaves slot rank() of the result (countPerRank elements)
  /// in `recv`. The buffers may overlap.
  virtual Status reduceScatter(const void *send, void *recv,
                               size_t countPerRank, DType dtype, ReduceOp op,
                               const std::string &what) = 0;

  /// Sends `bytes` bytes to rank `peer` (!= rank()); returns once the buffer
  /// may be reused, which for large messages is once `peer` has posted the
  /// matching recv (two ranks that both send first deadlock: use sendRecv).
  /// `tag` >= 0 tells messages between the same ranks apart.
  virtual Status send(const void *data, size_t bytes, int peer, int tag,
                      const std::string &what) = 0;
  /// Receives exactly `bytes` bytes from rank `peer` with `tag`; another
  /// size is an error.
  virtual Status recv(void *data, size_t bytes, int peer, int tag,
                      const std::string &what) = 0;
  /// send() to `dest` and recv() from `source` at the same time (a ring
  /// shift, or a pipeline stage passing activations forward while it
  /// receives gradients): cannot deadlock against the peers' sendRecv.
  virtual Status sendRecv(const void *sendData, size_t sendBytes, int dest,
                          void *recvData, size_t recvBytes, int source, int tag,
                          const std::string &what) = 0;

  /// Sends `bytes` bytes to rank `peer` like send(), but copies them into
  /// memory owned by the communicator and returns once the message is posted,
  /// without waiting for `peer`: the caller may overwrite `data` at once. The
  /// message matches a plain recv() of `bytes` bytes with `tag` on `peer`,
  /// and messages between two ranks with the same tag arrive in the order
  /// they were sent (posted or not). Sends posted earlier that have
  /// completed are released on the way; if one of them failed, its error
  /// is returned here instead of posting this message.
  virtual Status postSend(const void *data, size_t bytes, int peer, int tag,
                          const std::string &what) = 0;
  /// Gives the messages between this rank and each of `peers` a channel of
  /// their own, on a device communicator that runs its operations one
  /// group after another (NCCL's): for each pair of ranks a communicator
  /// and a stream for each direction, so that a message waits only for the
  /// earlier messages of its direction, never for this rank's other
  /// operations (a pipeline stage's sends to the next stage go out while it
  /// waits for the gradients from it, whatever the schedule's order).
  /// Every later send, postSend, sendRecv and recv between this rank and one of
  /// `peers` goes through its pipe, and the stream of this communicator waits
  /// for a receive but not for a send (completeSends and synchronize do).
  /// Collective over every rank of this communicator, each naming the ranks
  /// its program exchanges messages with (none: an empty list); a pair
  /// either of its ranks names gets a pipe. Every rank opens its pairs in
  /// one order common to all, in rounds in which no rank is in two pairs
  /// (PipeOrder.h: a pipeline's chain in two rounds, not p - 1 pairs one
  /// after another), which cannot wait in a cycle; each pair is connected
  /// before the call returns (NCCL connects two ranks on their first
  /// message). Call it once, before any message. Host communicators send
  /// as they post: nothing to open.
  virtual Status openPipes(const std::vector<int> &peers,
                           const std::string &what) {
    (void)peers;
    (void)what;
    return Status::success();
  }
  /// Waits until every message this rank posted with postSend has been sent
  /// (under the same deadline as the other operations) and frees their
  /// copies. Of the other ranks it needs only the recv()s of those messages.
  /// Call it where the memory should be given back, e.g. at the end of a
  /// step, and at the latest before the communicator is destroyed.
  virtual Status completeSends(const std::string &what) = 0;
  /// Queues the messages posted and not yet queued, without waiting for
  /// them: how a device communicator puts them into the work being
  /// recorded as a graph (its stream captured), whose completion is then
  /// theirs. Host communicators send as they post: nothing to queue.
  virtual Status queueSends(const std::string &what) {
    (void)what;
    return Status::success();
  }

  /// Makes in `out` the communicator of the ranks `ranks` of this one: rank
  /// i of the new communicator is ranks[i]. The ranks must be distinct and
  /// include rank(). Collective over the members of `ranks` only (the other
  /// ranks do not call it): every rank creates the groups it is in, in an
  /// order common to all ranks (e.g. sorted), or two ranks may each wait
  /// for the other in a different group. The new communicator works like
  /// this one (a group of a group is possible); destroy it before the
  /// communicator of the run.
  virtual Status createGroup(const std::vector<int> &ranks,
                             std::unique_ptr<Communicator> &out,
                             const std::string &what) = 0;

  /// Returns on every rank once every rank has called it.
  virtual Status barrier(const std::string &what) = 0;
  /// Copies `bytes` bytes at `data` on rank `root` to `data` on every rank.
  virtual Status broadcast(void *data, size_t bytes, int root,
                           const std::string &what) = 0;

  /// Waits until the operations this communicator queued have finished.
  /// Host communicators (local, MPI) finish each call before returning:
  /// nothing to wait for. A device communicator (NCCL) queues its
  /// collectives on a stream; this waits for them under its watchdog and
  /// reports their errors, naming `what`.
  virtual Status synchronize(const std::string &what) {
    (void)what;
    return Status::success();
  }

  /// Ends every rank of the run with exit status `code` (after flushing
  /// stdio): the way out after an error on one rank, so that the others do
  /// not wait for it in their next collective.
  [[noreturn]] virtual void abort(int code) = 0;

protected:
  /// Argument checks shared by the implementations, so that every backend
  /// refuses the same calls with the same message.
  Status checkReduce(const void *data, size_t count, DType dtype, ReduceOp op,
                     const std::string &what) const;
  Status checkBuffer(const void *data, size_t bytes,
                     const std::string &what) const;
  /// That `count` elements of `dtype` (`unit`: "elements", "elements per
  /// rank") fit size() times in the address space.
  Status checkCount(size_t count, DType dtype, const char *unit,
                    const std::string &what) const;
  /// A point-to-point message's arguments: checkPeer, then checkBuffer.
  Status checkPeerBuffer(const void *data, size_t bytes, int peer, int tag,
                         const char *verb, const std::string &what) const;
  Status checkPeer(int peer, int tag, const char *verb,
                   const std::string &what) const;
  Status checkRoot(int root, const std::string &what) const;
  Status checkGroup(const std::vector<int> &ranks,
                    const std::string &what) const;
};

/// The communicator of a single-rank run (LocalCommunicator.cpp): rank 0
/// of 1. Its only group is {0}, another local communicator; send, recv and
/// postSend are errors, and completeSends has nothing to wait for.
std::unique_ptr<Communicator> makeLocalCommunicator();

/// A local communicator shared by everything that was given no communicator.
Communicator &localCommunicator();

} // namespace smprt

#endif // SMPRT_COMM_COMMUNICATOR_H
