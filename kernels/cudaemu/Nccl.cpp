//===- Nccl.cpp - NCCL in the emulator, across processes ------------------===//
//
// The NCCL calls of runtime/comm/lib/nccl for the ranks of a run, each a
// process (smprun-emu -n N): a communicator is a folder under /dev/shm
// named by its unique id, and every operation is a file exchange there.
// Collectives (all-reduce, all-gather, reduce-scatter, broadcast) are
// numbered per communicator: each rank writes its contribution as
// c<seq>.r<rank> (written aside, then renamed), waits for every rank's, and
// reduces them in rank order (so all ranks hold the same bits, as NCCL's
// all-reduce gives them). A send writes p<src>.<dst>.<n> (the n-th message
// of that pair); the receive waits for it and removes it. A send completes
// only once its receive is posted (r<src>.<dst>.<n>, written when the
// receive's group starts), as NCCL's sends of more than its buffers hold (a
// few MB: a pipeline's activations) do, so that an order of groups that
// would hang on a GPU (two ranks each sending to the other in a group of
// its own before its receive) hangs here too, and is reported after the
// timeout, where without it the sends would have gone through. A group's
// operations progress together, as NCCL's do: its receives are posted and
// its sends' messages written first, then its collectives and receives
// run, then its sends wait for their receives, so that no order NCCL
// accepts deadlocks here. That last wait holds the group's stream, not the
// caller, as on a GPU: it is an item of its own (WorkKind::Lazy, Streams.h)
// that runs when something needs the stream (its next work, a wait for an
// event after it, a synchronization or query), so a rank goes on issuing
// (and, with the kernels run as issued, computing) while its send waits;
// a hang it finds is the communicator's asynchronous error and the
// context's sticky one.
//
// What NCCL would hang on or corrupt is refused (ncclInvalidUsage, with the
// emulator's report): ranks calling different collectives, counts, types or
// reduction ops at the same point; a receive whose size differs from its
// send; two ranks of a communicator on the same device ("Duplicate GPU");
// a rank waited for longer than SMP_CUDAEMU_NCCL_TIMEOUT seconds (default
// 300). A communicator of one rank exchanges nothing.
//
// An operation (or a whole group, at ncclGroupEnd) is checked when it is
// called and issued on its stream as one piece of work (Streams.cpp): it
// runs then, or, on a stream SMP_CUDAEMU_DEFER defers, when the stream's
// work reaches it; the exchange with the other ranks happens when it runs.
// The operations of a communicator run in the order they were issued (an
// operation runs the ones of its communicator issued before it first), the
// order every rank issues them in; those of two communicators on two
// streams apart, as on a GPU (a pipeline's communicator per pair of ranks
// and direction). While a rank waits for another (a message, a receive
// posted), its streams held by a send whose receive has been posted go on
// (progressQueued, Streams.h): the GPU would not wait for the host there.
// A failure of a deferred operation is the communicator's
// asynchronous error (ncclCommGetAsyncError) and the CUDA context's sticky
// error.
//
//===----------------------------------------------------------------------===//

#include "NcclReduce.h"
#include "State.h"
#include "Streams.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <nccl.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace smp::cudaemu;

struct ncclComm {
  int magic = 0x6e63;
  int nranks = 1, rank = 0;
  int serial = 0; // the process's communicators, 1 the first made
  std::string dir;
  uint64_t collectives = 0;
  std::vector<uint64_t> sent, received; // messages per peer
  std::vector<uint64_t> posted;         // receives posted per peer
  ncclResult_t asyncError = ncclSuccess; // of an operation that ran later
};

namespace {

enum Kind : int32_t { AllReduce, AllGather, ReduceScatter, Broadcast };
const char *kindName(int32_t k) {
  static const char *const names[] = {"ncclAllReduce", "ncclAllGather",
                                      "ncclReduceScatter", "ncclBroadcast"};
  return k >= 0 && k < 4 ? names[k] : "?";
}

/// The header of an exchanged file.
struct Header {
  int32_t kind, type, op, root;
  uint64_t count, bytes;
};

/// A deferred operation of a group.
struct Op {
  enum { Send, Recv, Collective } what;
  ncclComm_t comm;
  const void *send;
  void *recv;
  size_t count;
  ncclDataType_t type;
  int32_t kind, redop, root, peer;
  cudaStream_t stream;
};

thread_local int groupDepth = 0;
thread_local std::deque<Op> pending;
thread_local std::string lastError;

size_t typeSize(ncclDataType_t t) {
  switch (t) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

ncclResult_t failed(ncclResult_t r, const std::string &why) {
  lastError = why;
  report("NCCL: " + why);
  return r;
}

ncclResult_t checkBuffer(const char *call, const char *which, const void *p,
                         size_t bytes) {
  if (bytes == 0 || deviceAccessible(p, bytes))
    return ncclSuccess;
  setError(cudaErrorIllegalAddress, true);
  return failed(ncclInvalidArgument,
                std::string(call) + ": the " + which + " buffer (" +
                    std::to_string(bytes) +
                    " bytes) is not inside a device allocation");
}

double timeoutSeconds() {
  const char *v = std::getenv("SMP_CUDAEMU_NCCL_TIMEOUT");
  return v ? std::atof(v) : 300.0;
}

bool writeFile(const ncclComm &c, const std::string &name, const Header &h,
               const void *data) {
  std::string tmp = c.dir + "/.tmp." + std::to_string(c.rank) + "." + name;
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return false;
  bool ok = std::fwrite(&h, sizeof h, 1, f) == 1 &&
            (h.bytes == 0 || std::fwrite(data, 1, h.bytes, f) == h.bytes);
  ok = std::fclose(f) == 0 && ok;
  return ok && std::rename(tmp.c_str(), (c.dir + "/" + name).c_str()) == 0;
}

/// Waits for `name` and reads it; false (with lastError) after the timeout.
bool readFile(const ncclComm &c, const std::string &name, int from,
              const char *what, Header &h, std::vector<char> &data) {
  std::string path = c.dir + "/" + name;
  auto start = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    if (std::FILE *f = std::fopen(path.c_str(), "rb")) {
      bool ok = std::fread(&h, sizeof h, 1, f) == 1;
      data.resize(ok ? h.bytes : 0);
      ok = ok && (h.bytes == 0 || std::fread(data.data(), 1, h.bytes, f) ==
                                      h.bytes);
      std::fclose(f);
      if (ok)
        return true;
      failed(ncclSystemError, std::string(what) + ": cannot read " + path);
      return false;
    }
    double waited = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    if (waited > timeoutSeconds()) {
      failed(ncclRemoteError,
             std::string(what) + " on rank " + std::to_string(c.rank) +
                 ": rank " + std::to_string(from) + " did not take part in " +
                 std::to_string(waited) +
                 " s (a real run would hang; SMP_CUDAEMU_NCCL_TIMEOUT)");
      return false;
    }
    // Meanwhile the streams whose sends' receives were posted go on.
    if (progressQueued())
      continue;
    if (spins < 100)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

/// The bytes a collective sends and receives on this rank.
void collectiveBytes(const Op &o, size_t &in, size_t &out) {
  const ncclComm &c = *o.comm;
  in = out = o.count * typeSize(o.type);
  if (o.kind == AllGather)
    out = in * c.nranks;
  if (o.kind == ReduceScatter)
    in = out * c.nranks;
  if (o.kind == Broadcast && c.rank != o.root)
    in = 0;
}

/// A collective's buffers, checked when it is called.
ncclResult_t checkCollective(const Op &o) {
  const ncclComm &c = *o.comm;
  const char *what = kindName(o.kind);
  size_t in, out;
  collectiveBytes(o, in, out);
  if (ncclResult_t r = checkBuffer(what, "send", o.send, in))
    return r;
  if (ncclResult_t r = checkBuffer(what, "receive", o.recv, out))
    return r;
  // Overlapping buffers are NCCL's in-place forms only.
  auto at = [](const void *p) { return reinterpret_cast<uintptr_t>(p); };
  bool overlap = in && out && at(o.send) < at(o.recv) + out &&
                 at(o.recv) < at(o.send) + in;
  uintptr_t inPlace = at(o.recv); // where send must be when they overlap
  if (o.kind == AllGather)
    inPlace = at(o.recv) + c.rank * in;
  if (o.kind == ReduceScatter)
    inPlace = at(o.recv) - c.rank * out;
  if (overlap && at(o.send) != inPlace)
    return failed(ncclInvalidUsage,
                  std::string(what) + " on rank " + std::to_string(c.rank) +
                      ": send and receive buffers overlap but are not NCCL's "
                      "in-place form (the result would be garbage)");
  return ncclSuccess;
}

/// One collective of every rank: this rank's part in, the result out.
ncclResult_t collective(const Op &o) {
  ncclComm &c = *o.comm;
  const char *what = kindName(o.kind);
  size_t in, out;
  collectiveBytes(o, in, out);
  if (c.nranks == 1) {
    if (in && o.send != o.recv)
      std::memmove(o.recv, o.send, out);
    return ncclSuccess;
  }
  uint64_t seq = c.collectives++;
  Header mine{o.kind, o.type, o.redop, o.root, o.count, in};
  std::string base = "c" + std::to_string(seq) + ".r";
  if (!writeFile(c, base + std::to_string(c.rank), mine, o.send))
    return failed(ncclSystemError, std::string(what) + ": cannot write in " +
                                       c.dir);
  std::vector<std::vector<char>> parts(c.nranks);
  for (int r = 0; r < c.nranks; ++r) {
    Header h;
    if (!readFile(c, base + std::to_string(r), r, what, h, parts[r]))
      return ncclRemoteError;
    if (h.kind != mine.kind || h.type != mine.type || h.count != mine.count ||
        (o.kind != AllGather && h.op != mine.op) || h.root != mine.root)
      return failed(ncclInvalidUsage,
                    "collective #" + std::to_string(seq) + ": rank " +
                        std::to_string(c.rank) + " calls " + what + " of " +
                        std::to_string(o.count) + " elements (type " +
                        std::to_string(o.type) + ", op " +
                        std::to_string(o.redop) + ") but rank " +
                        std::to_string(r) + " " + kindName(h.kind) + " of " +
                        std::to_string(h.count) + " (type " +
                        std::to_string(h.type) + ", op " +
                        std::to_string(h.op) +
                        "): NCCL would hang or mix them up");
  }
  switch (o.kind) {
  case AllGather:
    for (int r = 0; r < c.nranks; ++r)
      std::memcpy(static_cast<char *>(o.recv) + r * in, parts[r].data(), in);
    break;
  case Broadcast:
    std::memcpy(o.recv, parts[o.root].data(), out);
    break;
  default: { // reduce in rank order: every rank the same bits
    size_t n = o.kind == AllReduce ? o.count : o.count * c.nranks;
    std::vector<char> acc(parts[0]);
    for (int r = 1; r < c.nranks; ++r)
      combine(acc.data(), parts[r].data(), n, o.type, o.redop);
    if (o.redop == ncclAvg)
      average(acc.data(), n, o.type, c.nranks);
    size_t off = o.kind == AllReduce ? 0 : c.rank * out;
    std::memcpy(o.recv, acc.data() + off, out);
  }
  }
  // Everyone has written collective seq, so everyone finished reading
  // seq - 1: this rank's file of it can go.
  if (seq > 0)
    std::remove((c.dir + "/c" + std::to_string(seq - 1) + ".r" +
                 std::to_string(c.rank))
                    .c_str());
  return ncclSuccess;
}

std::string pairName(int src, int dst, uint64_t n) {
  return "p" + std::to_string(src) + "." + std::to_string(dst) + "." +
         std::to_string(n);
}

/// The marker of message `n` from `src` to `dst`: its receive is posted.
std::string markerName(int src, int dst, uint64_t n) {
  return "r" + pairName(src, dst, n);
}

/// Posts a receive: its marker for the send it matches.
ncclResult_t post(const Op &o) {
  ncclComm &c = *o.comm;
  Header h{-1, o.type, 0, 0, 0, 0};
  if (!writeFile(c, markerName(o.peer, c.rank, c.posted[o.peer]++), h, nullptr))
    return failed(ncclSystemError, "ncclRecv: cannot write in " + c.dir);
  return ncclSuccess;
}

/// Sends: the message, for its receive to take. `n` is its number.
ncclResult_t send(const Op &o, uint64_t &n) {
  ncclComm &c = *o.comm;
  size_t bytes = o.count * typeSize(o.type);
  n = c.sent[o.peer]++;
  Header h{-1, o.type, 0, 0, o.count, bytes};
  if (!writeFile(c, pairName(c.rank, o.peer, n), h, o.send))
    return failed(ncclSystemError, "ncclSend: cannot write in " + c.dir);
  return ncclSuccess;
}

/// Waits for the receive of message `n` of a send to be posted: the send
/// is done then.
ncclResult_t sent(const Op &o, uint64_t n) {
  ncclComm &c = *o.comm;
  std::string posted = markerName(c.rank, o.peer, n);
  Header h;
  std::vector<char> none;
  if (!readFile(c, posted, o.peer,
                "ncclSend (its receive never posted: NCCL holds a send "
                "larger than its buffers until then)",
                h, none))
    return ncclRemoteError;
  std::remove((c.dir + "/" + posted).c_str());
  return ncclSuccess;
}

ncclResult_t recv(const Op &o) {
  ncclComm &c = *o.comm;
  size_t bytes = o.count * typeSize(o.type);
  std::string name = pairName(o.peer, c.rank, c.received[o.peer]++);
  Header h;
  std::vector<char> data;
  if (!readFile(c, name, o.peer, "ncclRecv", h, data))
    return ncclRemoteError;
  std::remove((c.dir + "/" + name).c_str());
  if (h.bytes != bytes)
    return failed(ncclInvalidUsage,
                  "rank " + std::to_string(c.rank) + " receives " +
                      std::to_string(bytes) + " bytes from rank " +
                      std::to_string(o.peer) + ", which sent " +
                      std::to_string(h.bytes));
  std::memcpy(o.recv, data.data(), bytes);
  return ncclSuccess;
}

/// Runs a group's operations, which NCCL progresses together: what each
/// gives the other ranks first (its receives posted, its sends' messages),
/// then the collectives and the receives, so that no operation of the group
/// waits for another. The sends' completions (their receives posted) are
/// sendsDone's, with the messages' numbers this leaves in `numbers`.
ncclResult_t runGroup(const std::deque<Op> &ops,
                      std::vector<uint64_t> &numbers) {
  ncclResult_t first = ncclSuccess;
  auto note = [&](ncclResult_t r) {
    if (first == ncclSuccess)
      first = r;
  };
  for (const Op &o : ops)
    if (o.what == Op::Recv)
      note(post(o));
  for (const Op &o : ops)
    if (o.what == Op::Send && first == ncclSuccess)
      note(send(o, numbers.emplace_back()));
  for (const Op &o : ops)
    if (o.what == Op::Collective && first == ncclSuccess)
      note(collective(o));
  for (const Op &o : ops)
    if (o.what == Op::Recv && first == ncclSuccess)
      note(recv(o));
  return first;
}

/// Whether every send of a group has had its receive posted (a probe:
/// sendsDone then waits for nothing).
bool receivesPosted(const std::deque<Op> &ops,
                    const std::vector<uint64_t> &numbers) {
  if (static_cast<size_t>(
          std::count_if(ops.begin(), ops.end(), [](const Op &o) {
            return o.what == Op::Send;
          })) != numbers.size())
    return false; // the group has not run
  size_t k = 0;
  for (const Op &o : ops)
    if (o.what == Op::Send &&
        access(
            (o.comm->dir + "/" + markerName(o.comm->rank, o.peer, numbers[k++]))
                .c_str(),
            F_OK) != 0)
      return false;
  return true;
}

/// A group's sends' waits for their receives to be posted.
ncclResult_t sendsDone(const std::deque<Op> &ops,
                       const std::vector<uint64_t> &numbers) {
  size_t k = 0;
  for (const Op &o : ops)
    if (o.what == Op::Send && k < numbers.size())
      if (ncclResult_t r = sent(o, numbers[k++]))
        return r;
  return ncclSuccess;
}

/// With SMP_CUDAEMU_NCCL_TRACE=DIR: a line a group (or lone operation) as
/// it is issued, appended to DIR/nccl.<pid>.txt: "comm C, rank R of N:"
/// (C: the process's C-th communicator, its first op's) and its
/// operations in order ("send to P (B bytes)", "recv from P (B bytes)",
/// "ncclAllReduce (B bytes)", ...), so that the groups a runtime makes
/// can be read and tested without a GPU.
void trace(const std::deque<Op> &ops) {
  static const char *dir = std::getenv("SMP_CUDAEMU_NCCL_TRACE");
  if (!dir || !*dir || ops.empty())
    return;
  const ncclComm &c = *ops.front().comm;
  std::string line = "comm " + std::to_string(c.serial) + ", rank " +
                     std::to_string(c.rank) + " of " +
                     std::to_string(c.nranks) + ":";
  for (const Op &o : ops) {
    std::string bytes =
        " (" + std::to_string(o.count * typeSize(o.type)) + " bytes)";
    if (o.what == Op::Send)
      line += " send to " + std::to_string(o.peer) + bytes + ";";
    else if (o.what == Op::Recv)
      line += " recv from " + std::to_string(o.peer) + bytes + ";";
    else
      line += std::string(" ") + kindName(o.kind) + bytes + ";";
  }
  line.back() = '\n';
  std::string path =
      std::string(dir) + "/nccl." + std::to_string(getpid()) + ".txt";
  if (std::FILE *f = std::fopen(path.c_str(), "a")) {
    std::fputs(line.c_str(), f);
    std::fclose(f);
  }
}

/// Issues a group's operations as one piece of work on the first one's
/// stream (the streams of the others join it before and after, as NCCL
/// joins them): the result when it ran at once, else success (a failure
/// later is the communicator's asynchronous error and the sticky one).
ncclResult_t submit(std::deque<Op> ops) {
  if (ops.empty())
    return ncclSuccess;
  trace(ops);
  cudaStream_t stream = ops.front().stream;
  std::vector<cudaStream_t> others;
  for (const Op &o : ops)
    if (o.stream != stream &&
        std::find(others.begin(), others.end(), o.stream) == others.end())
      others.push_back(o.stream);
  for (cudaStream_t t : others)
    enqueueWait(stream, streamTail(t));
  struct Run {
    ncclResult_t result = ncclSuccess;
    std::thread::id issuer = std::this_thread::get_id();
    std::atomic<bool> issuing{true}; // inside enqueueWork's call
  };
  auto run = std::make_shared<Run>();
  auto shared = std::make_shared<const std::deque<Op>>(std::move(ops));
  auto numbers = std::make_shared<std::vector<uint64_t>>();
  bool sends = std::any_of(shared->begin(), shared->end(),
                           [](const Op &o) { return o.what == Op::Send; });
  // Ordered per communicator (a group of several: its first one's); a
  // group of sends alone waits for no one and may run while the host waits.
  WorkOrder order;
  order.key = reinterpret_cast<uintptr_t>(shared->front().comm);
  order.mayWait = std::any_of(shared->begin(), shared->end(),
                              [](const Op &o) { return o.what != Op::Send; });
  // A failure after the call returned: the communicator's asynchronous
  // error and the CUDA context's sticky one.
  auto later = [shared](ncclResult_t r) {
    shared->front().comm->asyncError = r;
    setError(cudaErrorLaunchFailure, true);
  };
  Issued issued = enqueueWork(
      stream,
      [shared, numbers, run, later] {
        numbers->clear(); // a graph's launches run this closure again
        run->result = runGroup(*shared, *numbers);
        bool now = run->issuing && run->issuer == std::this_thread::get_id();
        if (run->result != ncclSuccess && !now)
          later(run->result);
      },
      WorkKind::Ordered, order);
  run->issuing = false;
  // The sends' waits for their receives hold the stream, not the caller:
  // they run when something needs the stream (its next work, a wait for an
  // event after them, a synchronization), as on a GPU.
  if (sends && (!issued.ran || run->result == ncclSuccess)) {
    order.ready = [shared, numbers, run] {
      return run->result != ncclSuccess || receivesPosted(*shared, *numbers);
    };
    issued = enqueueWork(
        stream,
        [shared, numbers, run, later] {
          if (run->result != ncclSuccess)
            return; // the group failed: told already
          if (ncclResult_t r = sendsDone(*shared, *numbers))
            later(r);
        },
        WorkKind::Lazy, order);
  }
  for (cudaStream_t t : others)
    enqueueWait(t, issued.at);
  return issued.ran ? run->result : ncclSuccess;
}

ncclResult_t enqueue(Op o) {
  if (!o.comm || o.comm->magic != 0x6e63)
    return failed(ncclInvalidArgument, "no communicator");
  if (typeSize(o.type) == 0)
    return failed(ncclInvalidArgument, "a data type the emulator lacks");
  if ((o.what != Op::Collective) &&
      (o.peer < 0 || o.peer >= o.comm->nranks))
    return failed(ncclInvalidArgument,
                  "peer " + std::to_string(o.peer) + " outside " +
                      std::to_string(o.comm->nranks) + " ranks");
  if (o.what == Op::Send)
    if (ncclResult_t r = checkBuffer("ncclSend", "send", o.send,
                                     o.count * typeSize(o.type)))
      return r;
  if (o.what == Op::Recv)
    if (ncclResult_t r = checkBuffer("ncclRecv", "receive", o.recv,
                                     o.count * typeSize(o.type)))
      return r;
  if (o.what == Op::Collective)
    if (ncclResult_t r = checkCollective(o))
      return r;
  if (groupDepth) {
    pending.push_back(o);
    return ncclSuccess;
  }
  return submit({o});
}

/// Removes the folders of communicators whose first rank's process is gone
/// (a run killed before ncclCommDestroy).
void collectAbandoned() {
  std::error_code ec;
  for (const auto &e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    std::string name = e.path().filename().string();
    const std::string prefix = "smp-cudaemu-nccl-";
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    int pid = std::atoi(name.c_str() + prefix.size());
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
      std::filesystem::remove_all(e.path(), ec);
  }
}

} // namespace

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  collectAbandoned();
  std::memset(id, 0, sizeof(*id));
  std::random_device rd;
  std::snprintf(id->internal, sizeof id->internal,
                "/dev/shm/smp-cudaemu-nccl-%d-%08x%08x", int(getpid()), rd(),
                rd());
  if (mkdir(id->internal, 0700) != 0)
    return failed(ncclSystemError,
                  std::string("ncclGetUniqueId: cannot make ") + id->internal);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return failed(ncclInvalidArgument, "rank " + std::to_string(rank) +
                                           " of " + std::to_string(nranks));
  static std::atomic<int> made{0};
  auto *c = new ncclComm;
  c->serial = ++made;
  c->nranks = nranks;
  c->rank = rank;
  c->dir.assign(id.internal, strnlen(id.internal, sizeof id.internal));
  c->sent.assign(nranks, 0);
  c->received.assign(nranks, 0);
  c->posted.assign(nranks, 0);
  if (nranks > 1) {
    // NCCL refuses two ranks of one communicator on one GPU.
    int device = 0;
    cudaGetDevice(&device);
    Header h{0, 0, 0, device, 0, 0};
    if (!writeFile(*c, "dev" + std::to_string(rank), h, nullptr)) {
      delete c;
      return failed(ncclSystemError, "ncclCommInitRank: cannot write in " +
                                         std::string(id.internal));
    }
    for (int r = 0; r < nranks; ++r) {
      Header o;
      std::vector<char> none;
      if (!readFile(*c, "dev" + std::to_string(r), r, "ncclCommInitRank", o,
                    none)) {
        delete c;
        return ncclRemoteError;
      }
      if (r != rank && o.root == device) {
        delete c;
        return failed(ncclInvalidUsage,
                      "Duplicate GPU detected: rank " + std::to_string(rank) +
                          " and rank " + std::to_string(r) +
                          " both on device " + std::to_string(device));
      }
    }
  }
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *) {
  return ncclCommInitRank(comm, nranks, id, rank);
}

/// The communicator's operations issued so far run first (a deferred
/// stream's too).
ncclResult_t ncclCommFinalize(ncclComm_t) {
  runOrdered();
  return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  runOrdered();
  if (comm && comm->nranks > 1) {
    // The last rank to leave removes the folder: a rank may still be
    // reading the others' files (their devices, in ncclCommInitRank).
    Header h{};
    writeFile(*comm, "gone" + std::to_string(comm->rank), h, nullptr);
    bool last = true;
    for (int r = 0; r < comm->nranks && last; ++r)
      last = access((comm->dir + "/gone" + std::to_string(r)).c_str(), F_OK) ==
             0;
    std::error_code ignored; // both may be last: one removes
    if (last)
      std::filesystem::remove_all(comm->dir, ignored);
  } else if (comm) {
    std::error_code ignored;
    std::filesystem::remove_all(comm->dir, ignored);
  }
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  *asyncError = comm ? comm->asyncError : ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  *count = comm->nranks;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

const char *ncclGetLastError(ncclComm_t) { return lastError.c_str(); }

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error";
  case ncclSystemError:
    return "unhandled system error";
  case ncclInternalError:
    return "internal error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "unknown result code";
  }
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return enqueue({Op::Collective, comm, send, recv, count, type, AllReduce, op,
                  0, 0, stream});
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (comm && (root < 0 || root >= comm->nranks))
    return failed(ncclInvalidArgument, "ncclBroadcast: root outside the ranks");
  return enqueue({Op::Collective, comm, send, recv, count, type, Broadcast,
                  ncclSum, root, 0, stream});
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return enqueue({Op::Collective, comm, send, recv, count, type, AllGather,
                  ncclSum, 0, 0, stream});
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  return enqueue({Op::Collective, comm, send, recv, count, type, ReduceScatter,
                  op, 0, 0, stream});
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(
      {Op::Send, comm, send, nullptr, count, type, 0, 0, 0, peer, stream});
}
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return enqueue(
      {Op::Recv, comm, nullptr, recv, count, type, 0, 0, 0, peer, stream});
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return failed(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth)
    return ncclSuccess;
  std::deque<Op> ops;
  ops.swap(pending);
  return submit(std::move(ops));
}

} // extern "C"
