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

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <sched.h>
#include <string>
#include <thread>
#include <vector>

namespace smprt {
namespace {

using Clock = std::chrono::steady_clock;

std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

std::string cudaText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

/// NCCL's type for reducing `dtype`. NCCL has no 16-bit integers; Bool
/// (0 or 1) is u8, whose Max is 'any' and Min 'all' (checkReduce refuses Sum).
Status reduceType(DType dtype, ncclDataType_t &type, const std::string &what) {
  static const int types[] = {
      // by DType's value
      ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16, ncclUint8,
      ncclInt8,    -1 /*i16*/,  ncclInt32,   ncclInt64,    ncclUint8,
      -1 /*u16*/,  ncclUint32,  ncclUint64};
  static_assert(static_cast<int>(DType::U64) == 12, "one entry per DType");
  size_t i = static_cast<size_t>(dtype);
  if (i < sizeof(types) / sizeof(types[0]) && types[i] >= 0) {
    type = static_cast<ncclDataType_t>(types[i]);
    return Status::success();
  }
  return Status::failure(what + ": NCCL cannot reduce " + dtypeName(dtype) +
                         " tensors (it has no 16-bit integer type)");
}

ncclRedOp_t reduceOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Max:
    return ncclMax;
  case ReduceOp::Min:
    return ncclMin;
  case ReduceOp::Mean:
    return ncclAvg;
  case ReduceOp::Sum:
    break;
  }
  return ncclSum;
}

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && pa < pb + bBytes && pb < pa + aBytes;
}

/// Between two polls: yields for the first 2 ms of a wait (short
/// collectives end there), then sleeps 0.2 ms at a time.
void pause(Clock::time_point start) {
  if (Clock::now() - start < std::chrono::milliseconds(2))
    sched_yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

/// The first failure of several NCCL calls (ncclInProgress is no failure:
/// launch() settles it once the group is closed).
ncclResult_t firstFailure(ncclResult_t a, ncclResult_t b) {
  return a != ncclSuccess && a != ncclInProgress ? a : b;
}

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
    return launch(what, [&] {
      return ncclSend(data, bytes, ncclUint8, peer, comm_, stream_);
    });
  }

  Status recv(void *data, size_t bytes, int peer, int tag,
              const std::string &what) override {
    Status s = checkPeerBuffer(data, bytes, peer, tag, "receive from", what);
    if (!s.ok() || bytes == 0)
      return s;
    return launch(
        what,
        [&] { return ncclRecv(data, bytes, ncclUint8, peer, comm_, stream_); },
        tag);
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
    return postSendJoining(data, bytes, peer, tag, kNextOperation, what);
  }

  Status postSendJoining(const void *data, size_t bytes, int peer, int tag,
                         int64_t joinTag, const std::string &what) override {
    Status s = checkPeerBuffer(data, bytes, peer, tag, "send to", what);
    if (s.ok())
      s = usable(what);
    // An earlier message that failed fails this call.
    ncclResult_t state;
    if (s.ok())
      s = asyncState(what, state);
    if (!s.ok() || bytes == 0)
      return s;
    // The copy is queued on the stream now; the ncclSend waits for the next
    // group (see the header): queued alone, before this rank's receive from
    // the peer, it would wait for the peer's receive on the GPU, and the
    // peer's receive behind the peer's own send.
    void *copy = nullptr;
    if (!(s = stage(data, bytes, copy, what)).ok())
      return s;
    posted_.push_back(Posted{copy, bytes, peer, joinTag, what});
    if (joinTag != kAtOnce)
      return s;
    // A group of the messages at once (this one unless it is left behind
    // another message to the same peer).
    return launch(
        what, [] { return ncclSuccess; }, kAtOnceGroup);
  }

  Status queueSends(const std::string &what) override { return flush(what); }

  Status completeSends(const std::string &what) override {
    Status s = flush(what);
    if (s.ok() && sendsQueued_)
      s = waitDone(sent_, what);
    if (s.ok())
      sendsQueued_ = false;
    return s;
  }

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
    return s;
  }

  [[noreturn]] void abort(int code) override;

private:
  /// A message of postSend: its copy, queued at once (kAtOnce) or with the
  /// next group (kNextOperation), or held for the group of the receive of
  /// its joinTag (kAtCompleteSends: none but completeSends', synchronize()'s
  /// or queueSends').
  struct Posted {
    void *copy;
    size_t bytes;
    int peer;
    int64_t joinTag;
    std::string what;
  };
  /// What launch() queues with its operation: kEveryMessage (flush),
  /// kAtOnceGroup (the messages at once: postSendJoining's group), or the
  /// messages for the next operation or at once and, for a receive, its
  /// tag's (kNotAReceive: none held).
  static constexpr int64_t kEveryMessage = -10, kNotAReceive = -11,
                           kAtOnceGroup = -12;

  /// Takes out of posted_ the messages a group anchored at `anchor` queues,
  /// in posting order: every one (kEveryMessage), the messages at once
  /// (kAtOnceGroup), else those for the next operation or at once and
  /// those held for this receive (`anchor` its tag). A message after one
  /// left to the same peer is left with it: NCCL matches two ranks'
  /// messages in order.
  std::vector<Posted> take(int64_t anchor) {
    std::vector<Posted> taken, kept;
    std::vector<int> heldPeers;
    for (Posted &p : posted_) {
      bool peerHeld = std::find(heldPeers.begin(), heldPeers.end(), p.peer) !=
                      heldPeers.end();
      bool next = p.joinTag == kAtOnce ||
                  (anchor != kAtOnceGroup && p.joinTag == kNextOperation);
      bool joins =
          anchor == kEveryMessage ||
          (!peerHeld && (next || (anchor >= 0 && p.joinTag == anchor)));
      if (joins) {
        taken.push_back(std::move(p));
      } else {
        heldPeers.push_back(p.peer);
        kept.push_back(std::move(p));
      }
    }
    posted_ = std::move(kept);
    return taken;
  }

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

  /// Queues the posted messages it takes (take(anchor)), then `ops` (NCCL
  /// calls; returns the first failure) as one NCCL group on the stream.
  template <class Ops>
  Status launch(const std::string &what, Ops ops,
                int64_t anchor = kNotAReceive) {
    Status s = usable(what);
    if (!s.ok())
      return s;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
      return ncclFailure(what, r);
    ncclResult_t first = ncclSuccess;
    std::vector<Posted> group = take(anchor);
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
    return launch(
        what, [] { return ncclSuccess; }, kEveryMessage);
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
    copy = nullptr;
    cudaError_t e = cudaSuccess;
    if (!pool_) {
      // A pool of its own that keeps freed memory for the next step (the
      // device's default pool would give it back at every synchronization).
      int device = -1;
      e = cudaStreamGetDevice(stream_, &device);
      cudaMemPoolProps props;
      std::memset(&props, 0, sizeof(props));
      props.allocType = cudaMemAllocationTypePinned;
      props.handleTypes = cudaMemHandleTypeNone;
      props.location.type = cudaMemLocationTypeDevice;
      props.location.id = device;
      if (e == cudaSuccess)
        e = cudaMemPoolCreate(&pool_, &props);
      if (e == cudaSuccess) {
        uint64_t keep = UINT64_MAX; // cuuint64_t
        e = cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold,
                                    &keep);
      }
      if (e != cudaSuccess && pool_) {
        cudaMemPoolDestroy(pool_);
        pool_ = nullptr;
      }
      if (e != cudaSuccess)
        return Status::failure(what +
                               ": cannot create the NCCL communicator's "
                               "memory pool: " +
                               cudaText(e));
    }
    e = cudaMallocFromPoolAsync(&copy, bytes, pool_, stream_);
    if (e != cudaSuccess) {
      copy = nullptr;
      return Status::failure(what + ": cannot allocate " +
                             std::to_string(bytes) +
                             " bytes on the device for a copy: " + cudaText(e));
    }
    e = cudaMemcpyAsync(copy, src, bytes, cudaMemcpyDeviceToDevice, stream_);
    if (e != cudaSuccess) {
      cudaFreeAsync(copy, stream_);
      copy = nullptr;
      return Status::failure(what + ": cannot copy " + std::to_string(bytes) +
                             " bytes on the device: " + cudaText(e));
    }
    return Status::success();
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
};

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
  if (comm_) {
    ncclCommAbort(comm_);
    comm_ = nullptr;
  }
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
