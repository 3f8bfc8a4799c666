//===- NcclCommunicator.cpp - Collectives on device buffers through NCCL ===//
//
// See smprt/comm/NcclCommunicator.h for the semantics. Every NCCL call of a
// communicator goes through launch() (one NCCL group: the posted messages,
// then the operation) and settle() (polls ncclInProgress away under the
// deadline); every wait for the GPU goes through waitDone() (polls the
// stream or an event and the NCCL error state under the deadline). An
// NCCL error, a failed stream or a missed deadline aborts the NCCL
// communicator (failure()); later calls report that first error.
//
//===----------------------------------------------------------------------===//

#include "smprt/comm/NcclCommunicator.h"

#include "NcclSupport.h"
#include "smprt/comm/PipeOrder.h"

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

namespace smprt {
namespace {

using namespace nccl_support;

class NcclCommunicator final : public Communicator {
public:
  /// `host` is the run's host communicator (not owned), or null with
  /// `ownedHost` the host group of a group (owned).
  NcclCommunicator(Communicator *host, std::unique_ptr<Communicator> ownedHost,
                   cudaStream_t stream, double timeout, int worldRank)
      : ownedHost_(std::move(ownedHost)), host_(host ? host : ownedHost_.get()),
        stream_(stream), timeout_(timeout), worldRank_(worldRank) {}
  ~NcclCommunicator() override;

  /// Makes the NCCL communicator of the host's ranks (collective over them).
  Status init(const std::string &what);

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int localSize() const override { return host_->localSize(); }
  const char *backend() const override { return "nccl"; }
  double timeoutSeconds() const override { return timeout_; }

  Status allReduce(void *data, size_t count, DType dtype, ReduceOp op,
                   const std::string &what) override {
    Status s = checkReduce(data, count, dtype, op, what);
    ncclDataType_t type = ncclUint8;
    if (s.ok())
      s = reduceType(dtype, type, what);
    if (!s.ok() || count == 0)
      return s;
    return launch(what, [&] {
      return ncclAllReduce(data, data, count, type, reduceOp(op), comm_,
                           stream_);
    });
  }

  Status allGather(const void *send, void *recv, size_t countPerRank,
                   DType dtype, const std::string &what) override {
    Status s = checkCount(countPerRank, dtype, "elements per rank", what);
    if (!s.ok())
      return s;
    size_t bytes = countPerRank * dtypeSize(dtype), total = bytes * size();
    s = checkBuffer(send, bytes, what);
    if (s.ok())
      s = checkBuffer(recv, total, what);
    if (s.ok())
      s = usable(what);
    if (!s.ok() || bytes == 0)
      return s;
    // Any dtype moves as bytes. In place when `send` is this rank's slot;
    // another overlap gathers from a copy.
    char *out = static_cast<char *>(recv);
    bool overlap =
        send != out + rank() * bytes && overlaps(send, bytes, out, total);
    return launchFrom(send, overlap ? bytes : 0, what, [&](const void *in) {
      return ncclAllGather(in, out, bytes, ncclUint8, comm_, stream_);
    });
  }

  Status reduceScatter(const void *send, void *recv, size_t countPerRank,
                       DType dtype, ReduceOp op,
                       const std::string &what) override {
    // checkReduce refuses counts whose size() slots overflow.
    Status s = checkReduce(send, countPerRank, dtype, op, what);
    size_t esize = dtypeSize(dtype);
    ncclDataType_t type = ncclUint8;
    if (s.ok())
      s = checkBuffer(recv, countPerRank * esize, what);
    if (s.ok())
      s = reduceType(dtype, type, what);
    if (s.ok())
      s = usable(what);
    if (!s.ok() || countPerRank == 0)
      return s;
    // In place when `recv` is this rank's slot of `send`; another overlap
    // reduces a copy of `send`.
    size_t bytes = countPerRank * esize, total = bytes * size();
    const char *slot = static_cast<const char *>(send) + rank() * bytes;
    bool overlap = recv != slot && overlaps(send, total, recv, bytes);
    return launchFrom(send, overlap ? total : 0, what, [&](const void *in) {
      return ncclReduceScatter(in, recv, countPerRank, type, reduceOp(op),
                               comm_, stream_);
    });
  }

  // Point-to-point: NCCL has no tags. The messages between two ranks of
  // this communicator are matched in the order they are queued, which is
  // the program's order on both ranks; `tag` only names the message in
  // errors. Zero-byte messages are not sent (the receiver skips them too).
  Status send(const void *data, size_t bytes, int peer, int tag,
              const std::string &what) override {
    Status s = checkPeerBuffer(data, bytes, peer, tag, "send to", what);
    if (!s.ok() || bytes == 0)
      return s;
    if (Pipe *p = pipeOf(peer))
      return pipeSend(*p, data, bytes, tag, what);
    return launch(what, [&] {
      return ncclSend(data, bytes, ncclUint8, peer, comm_, stream_);
    });
  }

  Status recv(void *data, size_t bytes, int peer, int tag,
              const std::string &what) override {
    Status s = checkPeerBuffer(data, bytes, peer, tag, "receive from", what);
    if (!s.ok() || bytes == 0)
      return s;
    if (Pipe *p = pipeOf(peer))
      return pipeRecv(*p, data, bytes, tag, what);
    return launch(what, [&] {
      return ncclRecv(data, bytes, ncclUint8, peer, comm_, stream_);
    });
  }

  Status sendRecv(const void *sendData, size_t sendBytes, int dest,
                  void *recvData, size_t recvBytes, int source, int tag,
                  const std::string &what) override {
    Status s = checkPeer(dest, tag, "send to", what);
    if (s.ok())
      s = checkPeer(source, tag, "receive from", what);
    if (s.ok())
      s = checkBuffer(sendData, sendBytes, what);
    if (s.ok())
      s = checkBuffer(recvData, recvBytes, what);
    if (!s.ok() || (sendBytes == 0 && recvBytes == 0))
      return s;
    // Through the pipes (openPipes names every peer a program has, so a
    // send on this communicator before a receive on a pipe does not
    // happen in practice): the send goes out on its own, then the receive.
    if (pipeOf(dest) || pipeOf(source)) {
      s = send(sendData, sendBytes, dest, tag, what);
      return s.ok() ? recv(recvData, recvBytes, source, tag, what) : s;
    }
    // One group: the send and the receive progress together.
    return launch(what, [&] {
      ncclResult_t r = ncclSuccess;
      if (recvBytes)
        r = ncclRecv(recvData, recvBytes, ncclUint8, source, comm_, stream_);
      if (sendBytes)
        r = firstFailure(
            r, ncclSend(sendData, sendBytes, ncclUint8, dest, comm_, stream_));
      return r;
    });
  }

  Status postSend(const void *data, size_t bytes, int peer, int tag,
                  const std::string &what) override {
    Status s = checkPeerBuffer(data, bytes, peer, tag, "send to", what);
    if (s.ok())
      s = usable(what);
    // An earlier message that failed fails this call.
    ncclResult_t state;
    if (s.ok())
      s = asyncState(what, state);
    if (!s.ok() || bytes == 0)
      return s;
    if (Pipe *p = pipeOf(peer))
      return pipeSend(*p, data, bytes, tag, what);
    // The copy is queued on the stream now; the ncclSend waits for the next
    // group (see the header): queued alone, before this rank's receive from
    // the peer, it would wait for the peer's receive on the GPU, and the
    // peer's receive behind the peer's own send.
    void *copy = nullptr;
    if ((s = stage(data, bytes, copy, what)).ok())
      posted_.push_back(Posted{copy, bytes, peer, what});
    return s;
  }

  Status queueSends(const std::string &what) override {
    Status s = flush(what);
    // A pipe's sends recorded into the graph join this stream before the
    // capture ends (a capture refuses work not joined back).
    for (auto &p : pipes_) {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      cudaError_t e = cudaStreamIsCapturing(p->outStream, &capture);
      if (s.ok() && e != cudaSuccess)
        s = failure(what + ": cannot query a pipe's stream: " + cudaText(e));
      if (s.ok() && capture == cudaStreamCaptureStatusActive)
        s = order(stream_, p->outStream, p->sent, what);
    }
    return s;
  }

  Status completeSends(const std::string &what) override {
    Status s = flush(what);
    if (s.ok() && sendsQueued_)
      s = waitDone(sent_, what);
    if (s.ok())
      sendsQueued_ = false;
    for (auto &p : pipes_) {
      if (s.ok() && p->sending)
        s = p->out->waitDone(p->sent, what);
      if (s.ok())
        p->sending = false;
    }
    return s;
  }

  Status openPipes(const std::vector<int> &peers,
                   const std::string &what) override;
  /// This rank's pairs in the order every rank opens its own (PipeOrder.h),
  /// from every rank's `peers` (collective over the host's ranks).
  Status pairOrder(const std::vector<int> &peers, const std::string &what,
                   std::vector<PipePair> &order);

  Status createGroup(const std::vector<int> &ranks,
                     std::unique_ptr<Communicator> &out,
                     const std::string &what) override {
    Status s = checkGroup(ranks, what);
    if (!s.ok())
      return s;
    // The host group first (collective over the members), then the NCCL
    // communicator over it: its rank 0 (ranks[0]) makes the id.
    std::unique_ptr<Communicator> hostGroup;
    if (!(s = host_->createGroup(ranks, hostGroup, what)).ok())
      return s;
    auto group = std::make_unique<NcclCommunicator>(
        nullptr, std::move(hostGroup), stream_, timeout_, worldRank_);
    if (!(s = group->init(what)).ok())
      return s;
    out = std::move(group);
    return s;
  }

  Status barrier(const std::string &what) override {
    return host_->barrier(what);
  }

  Status broadcast(void *data, size_t bytes, int root,
                   const std::string &what) override {
    return host_->broadcast(data, bytes, root, what);
  }

  Status synchronize(const std::string &what) override {
    Status s = flush(what);
    if (s.ok())
      s = waitDone(nullptr, what);
    if (s.ok())
      sendsQueued_ = false;
    for (auto &p : pipes_) {
      if (s.ok())
        s = p->out->synchronize(what);
      if (s.ok())
        s = p->in->synchronize(what);
      if (s.ok())
        p->sending = false;
    }
    return s;
  }

  [[noreturn]] void abort(int code) override;

private:
  /// The messages between this rank and `peer` (openPipes): a
  /// communicator and a stream each way, over the pair's host group
  /// (`out`: this rank sends, `in`: it receives; `pairPeer` is the peer's
  /// rank in them). `sent` is recorded after the last send, `received`
  /// after each receive (this communicator's stream waits for it).
  struct Pipe {
    int peer = -1, pairPeer = -1;
    std::unique_ptr<Communicator> host;
    cudaStream_t outStream = nullptr, inStream = nullptr;
    cudaEvent_t sent = nullptr, received = nullptr;
    std::unique_ptr<NcclCommunicator> out, in;
    bool sending = false; // sends queued since completeSends waited
    ~Pipe();
  };

  Pipe *pipeOf(int peer) {
    for (auto &p : pipes_)
      if (p->peer == peer)
        return p.get();
    return nullptr;
  }

  /// Makes `waiter` wait for the work queued on `on` so far (`event`
  /// recorded there).
  Status order(cudaStream_t waiter, cudaStream_t on, cudaEvent_t event,
               const std::string &what) {
    cudaError_t e = cudaEventRecord(event, on);
    if (e == cudaSuccess)
      e = cudaStreamWaitEvent(waiter, event, 0);
    if (e != cudaSuccess)
      return failure(what + ": cannot order a pipe's stream: " + cudaText(e));
    return Status::success();
  }

  /// A send through pipe `p`: a copy staged on this stream (the caller may
  /// overwrite `data` with its later work), sent on the pipe's stream,
  /// which this stream does not wait for.
  Status pipeSend(Pipe &p, const void *data, size_t bytes, int tag,
                  const std::string &what) {
    void *copy = nullptr;
    Status s = stage(data, bytes, copy, what);
    if (!s.ok())
      return s;
    if ((s = order(p.outStream, stream_, point_, what)).ok())
      s = p.out->send(copy, bytes, p.pairPeer, tag, what);
    cudaError_t e = cudaFreeAsync(copy, s.ok() ? p.outStream : stream_);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (e == cudaSuccess)
      e = cudaStreamIsCapturing(p.outStream, &capture);
    // Recorded into a graph, the send completes with its launch (see
    // launch()): nothing to wait for.
    if (e == cudaSuccess && capture == cudaStreamCaptureStatusNone) {
      e = cudaEventRecord(p.sent, p.outStream);
      p.sending = true;
    }
    if (s.ok() && e != cudaSuccess)
      s = failure(what + ": cannot queue a pipe's send: " + cudaText(e));
    return s;
  }

  /// A receive through pipe `p`: after this stream's work so far, and
  /// this stream's later work after it.
  Status pipeRecv(Pipe &p, void *data, size_t bytes, int tag,
                  const std::string &what) {
    Status s = order(p.inStream, stream_, point_, what);
    if (s.ok())
      s = p.in->recv(data, bytes, p.pairPeer, tag, what);
    if (s.ok())
      s = order(stream_, p.inStream, p.received, what);
    return s;
  }

  /// Aborts the NCCL communicator alone (a pipe's, when its parent aborts).
  void abortComm() {
    if (comm_) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }

  /// A message of postSend to a peer without a pipe: its copy, queued
  /// with the next group (completeSends', synchronize()'s or queueSends' at
  /// the latest).
  struct Posted {
    void *copy;
    size_t bytes;
    int peer;
    std::string what;
  };
  /// Fails once the NCCL communicator is gone.
  Status usable(const std::string &what) const {
    if (!failed_.empty())
      return Status::failure(what +
                             ": the NCCL communicator was aborted after "
                             "an earlier error: " +
                             failed_);
    if (!comm_)
      return Status::failure(what +
                             ": the NCCL communicator is not initialized");
    return Status::success();
  }

  /// Aborts the NCCL communicator (once); later calls report `message`.
  Status failure(const std::string &message) {
    if (comm_) {
      ncclCommAbort(comm_); // frees it; nothing to report if that fails
      comm_ = nullptr;
    }
    if (failed_.empty())
      failed_ = message;
    return Status::failure(message);
  }

  Status ncclFailure(const std::string &what, ncclResult_t r) {
    // ncclGetLastError needs the communicator: read it before the abort.
    const char *last = ncclGetLastError(comm_);
    std::string detail = last && *last ? std::string(" (") + last + ")" : "";
    return failure(what + ": NCCL error on rank " + std::to_string(worldRank_) +
                   ": " + ncclGetErrorString(r) + detail);
  }

  Status timedOut(const std::string &what) {
    return failure(what + ": no progress for " + secondsText(timeout_) +
                   " s; the NCCL communicator was aborted (a rank failed or is "
                   "stuck?)");
  }

  /// The communicator's state; an asynchronous error is a failure.
  Status asyncState(const std::string &what, ncclResult_t &state) {
    state = ncclInProgress;
    ncclResult_t r = ncclCommGetAsyncError(comm_, &state);
    if (r != ncclSuccess)
      return ncclFailure(what, r);
    if (state != ncclSuccess && state != ncclInProgress)
      return ncclFailure(what, state);
    return Status::success();
  }

  /// Calls `probe(done)` until done, a failure, or the deadline.
  template <class Probe> Status poll(const std::string &what, Probe probe) {
    auto start = Clock::now();
    auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(timeout_));
    for (;;) {
      bool done = false;
      Status s = probe(done);
      if (!s.ok() || done)
        return s;
      if (Clock::now() >= deadline)
        return timedOut(what);
      pause(start);
    }
  }

  /// Waits until NCCL has done what returned `r` (ncclInProgress).
  Status settle(ncclResult_t r, const std::string &what) {
    if (r != ncclInProgress)
      return r == ncclSuccess ? Status::success() : ncclFailure(what, r);
    return poll(what, [&](bool &done) {
      ncclResult_t state;
      Status s = asyncState(what, state);
      done = state == ncclSuccess;
      return s;
    });
  }

  /// Waits for `event`, or for the whole stream when null.
  Status waitDone(cudaEvent_t event, const std::string &what) {
    Status s = usable(what);
    if (!s.ok())
      return s;
    return poll(what, [&](bool &done) {
      cudaError_t e = event ? cudaEventQuery(event) : cudaStreamQuery(stream_);
      if (e != cudaSuccess && e != cudaErrorNotReady)
        return failure(what + ": the stream failed on rank " +
                       std::to_string(worldRank_) + ": " + cudaText(e) +
                       "; the NCCL communicator was aborted");
      done = e == cudaSuccess;
      ncclResult_t state;
      return asyncState(what, state);
    });
  }

  /// Queues the posted messages, then `ops` (NCCL calls; returns the first
  /// failure) as one NCCL group on the stream.
  template <class Ops> Status launch(const std::string &what, Ops ops) {
    Status s = usable(what);
    if (!s.ok())
      return s;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
      return ncclFailure(what, r);
    ncclResult_t first = ncclSuccess;
    std::vector<Posted> group = std::move(posted_);
    posted_.clear();
    for (const Posted &p : group)
      first = firstFailure(
          first, ncclSend(p.copy, p.bytes, ncclUint8, p.peer, comm_, stream_));
    first = firstFailure(first, ops());
    // Always closed: the group is the calling thread's.
    ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess && first != ncclInProgress)
      s = ncclFailure(what, first);
    else
      s = settle(end, what);
    if (!s.ok()) { // still posted: the destructor says so and frees them
      posted_.insert(posted_.begin(), std::make_move_iterator(group.begin()),
                     std::make_move_iterator(group.end()));
      return s;
    }
    if (group.empty())
      return s;
    // The copies go back to the pool once the group has run (stream order).
    // Recorded into a graph (the stream captured), the sends complete with
    // its launch, which the step's end waits for: no event of their own
    // (one recorded in a capture stands for no work a query could see).
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    cudaError_t e = cudaStreamIsCapturing(stream_, &capture);
    bool recorded = capture != cudaStreamCaptureStatusNone;
    if (e == cudaSuccess && !recorded)
      e = cudaEventRecord(sent_, stream_);
    for (const Posted &p : group) {
      cudaError_t f = cudaFreeAsync(p.copy, stream_);
      if (e == cudaSuccess)
        e = f;
    }
    if (e != cudaSuccess)
      return failure(
          what + ": cannot queue the posted sends' completion: " + cudaText(e));
    sendsQueued_ = sendsQueued_ || !recorded;
    return s;
  }

  /// Queues the posted messages alone.
  Status flush(const std::string &what) {
    if (posted_.empty())
      return usable(what);
    return launch(what, [] { return ncclSuccess; });
  }

  /// `copy`: a stream-ordered copy of `bytes` at `src` from the pool.
  /// launch() of `call` on `src`, or (when `copyBytes` > 0: `src` overlaps
  /// the output) on a staged copy of its first `copyBytes`, freed after the
  /// operation in stream order.
  template <typename Call>
  Status launchFrom(const void *src, size_t copyBytes, const std::string &what,
                    Call call) {
    void *copy = nullptr;
    if (copyBytes > 0) {
      Status s = stage(src, copyBytes, copy, what);
      if (!s.ok())
        return s;
    }
    Status s = launch(what, [&] { return call(copy ? copy : src); });
    if (copy)
      cudaFreeAsync(copy, stream_);
    return s;
  }

  Status stage(const void *src, size_t bytes, void *&copy,
               const std::string &what) {
    return stageCopy(pool_, stream_, src, bytes, copy, what);
  }

  std::unique_ptr<Communicator> ownedHost_;
  Communicator *host_;
  cudaStream_t stream_;
  double timeout_;
  int worldRank_; // the rank of the run's communicator, for messages
  ncclComm_t comm_ = nullptr;
  cudaEvent_t sent_ = nullptr;   // recorded after the last posted messages
  bool sendsQueued_ = false;     // sent_ recorded, not yet waited for
  cudaMemPool_t pool_ = nullptr; // copies of postSend and staged inputs
  std::vector<Posted> posted_;   // not yet queued
  std::string failed_;           // the error that aborted comm_
  std::vector<std::unique_ptr<Pipe>> pipes_; // openPipes', by peer
  cudaEvent_t point_ = nullptr;              // where a pipe's operation starts
};

NcclCommunicator::Pipe::~Pipe() {
  out.reset(); // waits for its stream, then destroys its NCCL communicator
  in.reset();
  for (cudaEvent_t e : {sent, received})
    if (e)
      cudaEventDestroy(e);
  for (cudaStream_t t : {outStream, inStream})
    if (t)
      cudaStreamDestroy(t);
}

Status NcclCommunicator::openPipes(const std::vector<int> &peers,
                                   const std::string &what) {
  Status s = usable(what);
  if (s.ok() && !pipes_.empty())
    s = Status::failure(what + ": the pipes are open already");
  std::vector<int> sorted;
  for (int peer : peers) {
    if (s.ok())
      s = checkPeer(peer, 0, "open a pipe to", what);
    sorted.push_back(peer);
  }
  if (!s.ok())
    return s;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  // Every rank's peers, for the order common to all (PipeOrder.h).
  std::vector<PipePair> order;
  if (!(s = pairOrder(sorted, what, order)).ok() || order.empty())
    return s;
  int priority = 0;
  cudaError_t e = cudaStreamGetPriority(stream_, &priority);
  if (e == cudaSuccess && !point_)
    e = cudaEventCreateWithFlags(&point_, cudaEventDisableTiming);
  void *byte = nullptr; // what connects a pair: a byte each way
  if (e == cudaSuccess)
    e = cudaMalloc(&byte, 1);
  if (e != cudaSuccess)
    return Status::failure(what + ": " + cudaText(e));
  for (const PipePair &pp : order) {
    int low = pp.low, high = pp.high, peer = rank() == low ? high : low;
    std::string pair = what + " (ranks " + std::to_string(low) + " and " +
                       std::to_string(high) + ")";
    auto p = std::make_unique<Pipe>();
    p->peer = peer;
    p->pairPeer = rank() == low ? 1 : 0;
    if (!(s = host_->createGroup({low, high}, p->host, pair)).ok())
      break;
    for (cudaStream_t *t : {&p->outStream, &p->inStream})
      if (e == cudaSuccess)
        e = cudaStreamCreateWithPriority(t, cudaStreamNonBlocking, priority);
    for (cudaEvent_t *v : {&p->sent, &p->received})
      if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(v, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      s = Status::failure(pair + ": " + cudaText(e));
      break;
    }
    // Low to high first, then high to low, on both ranks.
    for (bool lowSends : {true, false}) {
      bool sends = lowSends == (rank() == low);
      auto c = std::make_unique<NcclCommunicator>(
          p->host.get(), nullptr, sends ? p->outStream : p->inStream, timeout_,
          worldRank_);
      if (!(s = c->init(pair)).ok())
        break;
      s = sends ? c->send(byte, 1, p->pairPeer, 0, pair + ": connecting")
                : c->recv(byte, 1, p->pairPeer, 0, pair + ": connecting");
      if (s.ok())
        s = c->synchronize(pair + ": connecting");
      (sends ? p->out : p->in) = std::move(c);
      if (!s.ok())
        break;
    }
    if (!s.ok())
      break;
    pipes_.push_back(std::move(p));
  }
  cudaFree(byte);
  return s;
}

Status NcclCommunicator::pairOrder(const std::vector<int> &peers,
                                   const std::string &what,
                                   std::vector<PipePair> &order) {
  // The most peers a rank has, then every rank's (padded with -1).
  int32_t most = static_cast<int32_t>(peers.size());
  Status s = host_->allReduce(&most, 1, DType::I32, ReduceOp::Max,
                              what + " (the ranks' peers)");
  if (!s.ok() || most == 0)
    return s;
  std::vector<int32_t> all(static_cast<size_t>(host_->size()) * most, -1);
  std::vector<int32_t> mine(most, -1);
  std::copy(peers.begin(), peers.end(), mine.begin());
  if (!(s = host_->allGather(mine.data(), all.data(), most, DType::I32,
                             what + " (the ranks' peers)"))
           .ok())
    return s;
  std::vector<std::vector<int>> peersOfRank(host_->size());
  for (size_t k = 0; k < all.size(); ++k)
    if (all[k] >= 0)
      peersOfRank[k / most].push_back(all[k]);
  order = pipeOrderOf(pipeRounds(peersOfRank), rank());
  return Status::success();
}

Status NcclCommunicator::init(const std::string &what) {
  // Local checks first; every rank then takes part in the broadcast of the
  // id, with rank 0's status, so that a failure there fails every rank
  // instead of leaving the others waiting for it.
  Status local = Status::success();
  int current = -1, device = -1;
  cudaError_t e = cudaGetDevice(&current);
  if (e != cudaSuccess)
    local = Status::failure(what + ": no usable CUDA device on rank " +
                            std::to_string(worldRank_) + ": " + cudaText(e));
  else if ((e = cudaStreamGetDevice(stream_, &device)) != cudaSuccess)
    local = Status::failure(
        what + ": cannot find the stream's device: " + cudaText(e));
  else if (device != current)
    local = Status::failure(what + ": the current CUDA device is " +
                            std::to_string(current) + " but the stream is on " +
                            std::to_string(device));
  else if ((e = cudaEventCreateWithFlags(&sent_, cudaEventDisableTiming)) !=
           cudaSuccess)
    local = Status::failure(what + ": cannot create an event: " + cudaText(e));

  struct {
    ncclUniqueId id;
    int32_t ok;
  } msg;
  std::memset(&msg, 0, sizeof(msg));
  ncclResult_t r = ncclSuccess;
  if (host_->rank() == 0 && local.ok()) {
    r = ncclGetUniqueId(&msg.id);
    msg.ok = r == ncclSuccess;
    if (r != ncclSuccess)
      local = Status::failure(
          what + ": ncclGetUniqueId failed: " + ncclGetErrorString(r));
  }

  Status s = host_->broadcast(&msg, sizeof(msg), 0, what + " (NCCL id)");
  if (!s.ok())
    return s;
  if (!local.ok())
    return local;
  if (!msg.ok)
    return Status::failure(what + ": rank 0 of the group could not make an "
                                  "NCCL id (see its error)");
  // Non-blocking: the initialization waits for every rank; poll it under
  // the deadline instead of hanging in NCCL when a rank does not come.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  r = ncclCommInitRankConfig(&comm_, host_->size(), msg.id, host_->rank(),
                             &config);
  if (r != ncclSuccess && r != ncclInProgress)
    return ncclFailure(what, r); // aborts comm_ if NCCL made one
  if (!comm_)
    return failure(what + ": NCCL made no communicator");
  return settle(r, what);
}

NcclCommunicator::~NcclCommunicator() {
  pipes_.clear(); // their streams wait for this one's points, not after
  if (point_)
    cudaEventDestroy(point_);
  std::string what =
      "destroying the NCCL communicator of rank " + std::to_string(worldRank_);
  if (!posted_.empty()) {
    if (failed_.empty()) {
      std::fflush(stdout);
      std::fprintf(stderr,
                   "warning: rank %d: %zu message(s) of postSend never sent "
                   "when the NCCL communicator was destroyed, the first: %s "
                   "(call completeSends first)\n",
                   worldRank_, posted_.size(), posted_.front().what.c_str());
    }
    for (const Posted &p : posted_)
      cudaFreeAsync(p.copy, stream_);
    posted_.clear();
  }
  if (comm_) {
    // Lets the queued operations end (or aborts when they do not), then
    // ncclCommFinalize + ncclCommDestroy, the non-blocking sequence.
    Status s = waitDone(nullptr, what);
    if (s.ok())
      s = settle(ncclCommFinalize(comm_), what);
    if (s.ok()) {
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    } else {
      std::fprintf(stderr, "warning: %s\n", s.error.c_str());
    }
  }
  if (pool_)
    cudaMemPoolDestroy(pool_); // freed once the stream's frees have run
  if (sent_)
    cudaEventDestroy(sent_);
}

void NcclCommunicator::abort(int code) {
  for (auto &p : pipes_)
    for (NcclCommunicator *c : {p->out.get(), p->in.get()})
      if (c)
        c->abortComm();
  abortComm();
  host_->abort(code);
  std::fflush(nullptr); // not reached: the host communicator's abort ends
  std::_Exit(code);     // the process
}

} // namespace

Status createNcclCommunicator(Communicator &host, cudaStream_t stream,
                              const NcclOptions &options,
                              std::unique_ptr<Communicator> &out) {
  std::string what = "creating the NCCL communicator of " +
                     std::to_string(host.size()) +
                     (host.size() == 1 ? " rank" : " ranks");
  if (!(options.timeoutSeconds > 0))
    return Status::failure(what + ": the timeout must be positive, not " +
                           secondsText(options.timeoutSeconds));
  auto c = std::make_unique<NcclCommunicator>(
      &host, nullptr, stream, options.timeoutSeconds, host.rank());
  Status s = c->init(what);
  if (!s.ok())
    return s;
  out = std::move(c);
  return s;
}

} // namespace smprt
