//===- MpiCommunicator.cpp - Collectives over MPI with a watchdog ---------===//

#include "smprt/MpiCommunicator.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <sched.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace smprt {
namespace {

using Clock = std::chrono::steady_clock;

// What the SIGTERM handler reports: the operation this rank waits in (set
// around every wait) and the message prefix. Plain arrays: the handler may
// only read them and call write(2).
char gWaitingIn[512];
volatile sig_atomic_t gWaiting = 0;
char gPrefix[160];

void writeStderr(const char *s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(2, s, n);
    if (w <= 0)
      return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

extern "C" void onTerminate(int sig) {
  if (gWaiting) {
    writeStderr(gPrefix);
    writeStderr("stopped by the launcher in ");
    writeStderr(gWaitingIn);
    writeStderr(" (another rank failed, or the job was cancelled)\n");
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

/// Marks the operation this rank waits in for the SIGTERM handler.
struct WaitingIn {
  explicit WaitingIn(const std::string &what) {
    size_t n = std::min(what.size(), sizeof(gWaitingIn) - 1);
    gWaiting = 0;
    std::memcpy(gWaitingIn, what.data(), n);
    gWaitingIn[n] = 0;
    gWaiting = 1;
  }
  ~WaitingIn() { gWaiting = 0; }
};

/// A deadline for one blocking MPI call that cannot be polled
/// (MPI_Init_thread, MPI_Comm_dup, MPI_Comm_create_group, MPI_Finalize): a
/// thread that, unless the object is destroyed within `seconds`, writes
/// `message` (one line) to stderr and ends the process with _exit(1). It
/// calls no MPI (MPI_THREAD_FUNNELED); the launcher sees the rank exit with
/// an error and ends the others.
class BlockingDeadline {
public:
  BlockingDeadline(double seconds, std::string message)
      : message_(std::move(message)) {
    auto limit = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(std::min(seconds, 1e9)));
    thread_ = std::thread([this, limit] {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, limit, [this] { return done_; }))
        return;
      gWaiting = 0; // no second line from the SIGTERM handler
      writeStderr(message_.c_str());
      ::_exit(1);
    });
  }
  ~BlockingDeadline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  BlockingDeadline(const BlockingDeadline &) = delete;
  BlockingDeadline &operator=(const BlockingDeadline &) = delete;

private:
  std::string message_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

/// The watchdog's line for a blocking call: as for a polled operation,
/// "<program>: error: rank R: timed out after T s in <what> (<why>)".
std::string timedOutLine(const std::string &program, int rank, double seconds,
                         const std::string &what, const std::string &why) {
  return program + ": error: rank " + std::to_string(rank) +
         ": timed out after " + secondsText(seconds) + " s in " + what +
         " (" + why + ")\n";
}

/// SMP_FAULT_STALL_STARTUP_RANK=R: rank R sleeps before MPI_Init_thread,
/// as a rank that never starts (for tests of the start-up deadline).
void faultStallStartup(int rank) {
  const char *fault = std::getenv("SMP_FAULT_STALL_STARTUP_RANK");
  if (!fault || rank < 0 || std::atoi(fault) != rank)
    return;
  for (;;) {
    struct timespec ts = {3600, 0};
    nanosleep(&ts, nullptr);
  }
}

MPI_Datatype mpiType(DType t) {
  switch (t) {
  case DType::F32:
    return MPI_FLOAT;
  case DType::F64:
    return MPI_DOUBLE;
  case DType::Bool:
  case DType::U8:
    return MPI_UINT8_T;
  case DType::I8:
    return MPI_INT8_T;
  case DType::I16:
    return MPI_INT16_T;
  case DType::I32:
    return MPI_INT32_T;
  case DType::I64:
    return MPI_INT64_T;
  case DType::U16:
    return MPI_UINT16_T;
  case DType::U32:
    return MPI_UINT32_T;
  case DType::U64:
    return MPI_UINT64_T;
  case DType::F16:
  case DType::BF16:
    break; // reduced in f32
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Max:
    return MPI_MAX;
  case ReduceOp::Min:
    return MPI_MIN;
  case ReduceOp::Sum:
  case ReduceOp::Mean:
    break;
  }
  return MPI_SUM;
}

std::string mpiErrorText(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS)
    return "MPI error " + std::to_string(rc);
  return std::string(buf, len);
}

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && pa < pb + bBytes && pb < pa + aBytes;
}

bool isHalf(DType t) { return t == DType::F16 || t == DType::BF16; }

void toF32(const void *src, float *dst, size_t n, DType t) {
  const auto *s = static_cast<const uint16_t *>(src);
  if (t == DType::F16)
    for (size_t i = 0; i < n; ++i)
      dst[i] = halfToFloat(s[i]);
  else
    for (size_t i = 0; i < n; ++i)
      dst[i] = bf16ToFloat(s[i]);
}

void fromF32(const float *src, void *dst, size_t n, DType t) {
  auto *d = static_cast<uint16_t *>(dst);
  if (t == DType::F16)
    for (size_t i = 0; i < n; ++i)
      d[i] = floatToHalf(src[i]);
  else
    for (size_t i = 0; i < n; ++i)
      d[i] = floatToBf16(src[i]);
}

/// The mean of a sum over `ranks` ranks (float dtypes).
void divide(void *data, size_t n, DType t, int ranks) {
  if (t == DType::F32) {
    auto *p = static_cast<float *>(data);
    for (size_t i = 0; i < n; ++i)
      p[i] = p[i] / static_cast<float>(ranks);
  } else if (t == DType::F64) {
    auto *p = static_cast<double *>(data);
    for (size_t i = 0; i < n; ++i)
      p[i] = p[i] / static_cast<double>(ranks);
  }
}

/// The error of a completion call (MPI_Testall) over `n` requests: with
/// MPI_ERR_IN_STATUS, the first request's own error.
int firstError(int rc, const MPI_Status *statuses, int n) {
  if (rc == MPI_ERR_IN_STATUS && statuses)
    for (int i = 0; i < n; ++i)
      if (statuses[i].MPI_ERROR != MPI_SUCCESS &&
          statuses[i].MPI_ERROR != MPI_ERR_PENDING)
        return statuses[i].MPI_ERROR;
  return rc;
}

bool gCreated = false;

} // namespace

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1, localSize = 1, tagUB = 32767;
  int worldRank = 0;  // the process, for the watchdog and MPI errors
  bool world = false; // made by create(): finalizes MPI
  double timeout = 600;
  size_t maxChunkBytes = size_t(1) << 30;
  std::string program;

  /// A message of postSend: its copy and the MPI_Isend of every chunk.
  struct PostedSend {
    std::unique_ptr<char[]> copy;
    std::vector<MPI_Request> reqs;
    std::string what;
  };
  std::deque<PostedSend> posted; // oldest first

  Clock::time_point deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(timeout));
  }

  Status mpiError(int rc, const std::string &what) const {
    return Status::failure(what + ": MPI error on rank " +
                           std::to_string(worldRank) + ": " + mpiErrorText(rc));
  }

  [[noreturn]] void timedOut(const std::string &what) const {
    gWaiting = 0;
    std::fflush(stdout);
    std::fprintf(stderr,
                 "%s: error: rank %d: timed out after %g s in %s (a peer rank "
                 "died or hung)\n",
                 program.c_str(), worldRank, timeout, what.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    ::_exit(1);
  }

  /// Polls `n` requests until they complete; past `until`, ends the run.
  Status wait(MPI_Request *reqs, int n, MPI_Status *statuses,
              Clock::time_point until, const std::string &what) const {
    WaitingIn marker(what);
    auto spinUntil = Clock::now() + std::chrono::milliseconds(2);
    for (;;) {
      int done = 0;
      int rc = MPI_Testall(n, reqs, &done,
                           statuses ? statuses : MPI_STATUSES_IGNORE);
      rc = firstError(rc, statuses, n);
      if (rc != MPI_SUCCESS)
        return mpiError(rc, what);
      if (done)
        return Status::success();
      auto now = Clock::now();
      if (now >= until)
        timedOut(what);
      // Spin for the first milliseconds (small collectives finish there),
      // then poll every 20 us so that a long wait leaves the core to others.
      if (now < spinUntil) {
        sched_yield();
      } else {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
  }

  Status wait1(MPI_Request &req, Clock::time_point until,
               const std::string &what) const {
    return wait(&req, 1, nullptr, until, what);
  }

  /// MPI_Iallreduce in place, `maxChunkBytes` at a time.
  Status allReduceRaw(void *data, size_t count, MPI_Datatype type,
                      size_t esize, MPI_Op op, Clock::time_point until,
                      const std::string &what) const {
    size_t chunk = std::max<size_t>(1, maxChunkBytes / esize);
    char *p = static_cast<char *>(data);
    for (size_t off = 0; off < count; off += chunk) {
      int n = static_cast<int>(std::min(chunk, count - off));
      MPI_Request req;
      int rc = MPI_Iallreduce(MPI_IN_PLACE, p + off * esize, n, type, op,
                              comm, &req);
      if (rc != MPI_SUCCESS)
        return mpiError(rc, what);
      Status s = wait1(req, until, what);
      if (!s.ok())
        return s;
    }
    return Status::success();
  }

  /// MPI_Ireduce_scatter_block; `send` must not overlap `recv`.
  Status reduceScatterRaw(const void *send, void *recv, size_t count,
                          MPI_Datatype type, size_t esize, MPI_Op op,
                          Clock::time_point until,
                          const std::string &what) const {
    size_t chunk = std::max<size_t>(1, maxChunkBytes / esize);
    const char *in = static_cast<const char *>(send);
    char *out = static_cast<char *>(recv);
    if (count <= chunk) {
      MPI_Request req;
      int rc = MPI_Ireduce_scatter_block(in, out, static_cast<int>(count),
                                         type, op, comm, &req);
      if (rc != MPI_SUCCESS)
        return mpiError(rc, what);
      return wait1(req, until, what);
    }
    // Chunk k reduces elements [off, off + n) of every rank's slot.
    std::vector<char> tmp(std::min(chunk, count) * esize * size);
    for (size_t off = 0; off < count; off += chunk) {
      size_t n = std::min(chunk, count - off);
      for (int r = 0; r < size; ++r)
        std::memcpy(tmp.data() + r * n * esize, in + (r * count + off) * esize,
                    n * esize);
      MPI_Request req;
      int rc = MPI_Ireduce_scatter_block(tmp.data(), out + off * esize,
                                         static_cast<int>(n), type, op, comm,
                                         &req);
      if (rc != MPI_SUCCESS)
        return mpiError(rc, what);
      Status s = wait1(req, until, what);
      if (!s.ok())
        return s;
    }
    return Status::success();
  }

  Status checkTag(int tag, const std::string &what) const {
    if (tag > tagUB)
      return Status::failure(what + ": tag " + std::to_string(tag) +
                             " is above MPI's limit " + std::to_string(tagUB));
    return Status::success();
  }

  size_t chunks(size_t bytes) const {
    return std::max<size_t>(1, (bytes + maxChunkBytes - 1) / maxChunkBytes);
  }
  int chunkBytes(size_t bytes, size_t k) const {
    size_t off = k * maxChunkBytes;
    return off >= bytes ? 0
                        : static_cast<int>(std::min(maxChunkBytes, bytes - off));
  }

  /// Checks what one receive got.
  Status checkReceived(const MPI_Status &st, int expected, int source,
                       const std::string &what) const {
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (got != expected)
      return Status::failure(what + ": rank " + std::to_string(rank) +
                             " received " + std::to_string(got) +
                             " bytes from rank " + std::to_string(source) +
                             ", expected " + std::to_string(expected));
    return Status::success();
  }

  Status truncation(int rc, int source, size_t bytes,
                    const std::string &what) const {
    int cls = 0;
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_TRUNCATE)
      return Status::failure(what + ": rank " + std::to_string(source) +
                             " sent more than the " + std::to_string(bytes) +
                             " bytes rank " + std::to_string(rank) +
                             " expected");
    return Status::success();
  }

  /// Releases the posted sends that have completed, whichever order they
  /// completed in; returns the error of the first that failed. A failed
  /// send's copy is left to MPI (it may still be reading it).
  Status reapSends() {
    Status s = Status::success();
    std::vector<MPI_Status> st;
    size_t keep = 0;
    for (size_t i = 0; i < posted.size(); ++i) {
      PostedSend &p = posted[i];
      int n = static_cast<int>(p.reqs.size()), done = 0;
      MPI_Status ok;
      ok.MPI_ERROR = MPI_SUCCESS;
      st.assign(p.reqs.size(), ok);
      int rc = firstError(MPI_Testall(n, p.reqs.data(), &done, st.data()),
                          st.data(), n);
      if (rc != MPI_SUCCESS) {
        if (s.ok())
          s = mpiError(rc, p.what);
        (void)p.copy.release();
        done = 1;
      }
      if (!done) {
        if (keep != i)
          posted[keep] = std::move(p);
        ++keep;
      }
    }
    posted.resize(keep);
    return s;
  }

  /// When the communicator is destroyed: gives the posted sends a moment to
  /// complete, then leaves the rest to MPI (MPI_Request_free) with their
  /// copies, which it may still read.
  void abandonSends() {
    auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(
                                        std::max(0.0, std::min(timeout, 1.0))));
    for (;;) {
      (void)reapSends(); // too late to report errors
      if (posted.empty() || Clock::now() >= until)
        break;
      struct timespec ts = {0, 100000};
      nanosleep(&ts, nullptr);
    }
    if (posted.empty())
      return;
    std::fflush(stdout);
    std::fprintf(stderr,
                 "%s: warning: rank %d: %zu message(s) of postSend still "
                 "pending when the communicator was destroyed, the first: %s "
                 "(call completeSends first)\n",
                 program.c_str(), worldRank, posted.size(),
                 posted.front().what.c_str());
    for (PostedSend &p : posted) {
      for (MPI_Request &r : p.reqs)
        if (r != MPI_REQUEST_NULL)
          MPI_Request_free(&r);
      (void)p.copy.release();
    }
    posted.clear();
  }
};

MpiCommunicator::MpiCommunicator() : impl_(std::make_unique<Impl>()) {}

Status MpiCommunicator::create(const MpiOptions &options,
                               std::unique_ptr<MpiCommunicator> &out) {
  if (gCreated)
    return Status::failure("MPI communicator: one per process, and this "
                           "process has made one already");
  // Start-up is bounded like every operation: MPI_Init_thread and the
  // collectives below wait for every rank and cannot be polled. A SIGTERM
  // from the launcher meanwhile says where this rank was.
  int rank = options.launchRank;
  std::string who = rank >= 0 ? std::to_string(rank) : std::string("?");
  std::snprintf(gPrefix, sizeof(gPrefix), "%s: error: rank %s: ",
                options.program.c_str(), who.c_str());
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = onTerminate;
  sigemptyset(&sa.sa_mask);
  std::string startup = "MPI start-up";
  std::string why =
      (rank >= 0 && options.launchSize > 0
           ? "rank " + who + " of " + std::to_string(options.launchSize) +
                 "; "
           : std::string()) +
      "MPI_Init waits for every rank of the run: a rank did not start or is "
      "stopped, or the launcher's network is unreachable; --timeout sets "
      "the limit";
  std::unique_ptr<MpiCommunicator> c;
  {
    sigaction(SIGTERM, &sa, nullptr);
    WaitingIn marker(startup);
    BlockingDeadline deadline(options.timeoutSeconds,
                              timedOutLine(options.program, rank,
                                           options.timeoutSeconds, startup,
                                           why));
    faultStallStartup(rank);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      int rc =
          MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      if (rc != MPI_SUCCESS)
        return Status::failure("MPI_Init_thread failed: " + mpiErrorText(rc));
    }
    gCreated = true;
    c.reset(new MpiCommunicator());
    Impl &m = *c->impl_;
    m.world = true;
    m.timeout = options.timeoutSeconds;
    m.program = options.program;
    m.maxChunkBytes = std::max<size_t>(
        1, std::min<size_t>(options.maxChunkBytes, INT32_MAX));
    // Errors are returned, not fatal, on the world and on our duplicate.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &m.comm);
    if (rc != MPI_SUCCESS)
      return Status::failure("MPI_Comm_dup failed: " + mpiErrorText(rc));
    MPI_Comm_set_errhandler(m.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m.comm, &m.rank);
    MPI_Comm_size(m.comm, &m.size);
    m.worldRank = m.rank;
    MPI_Comm local;
    if (MPI_Comm_split_type(m.comm, MPI_COMM_TYPE_SHARED, m.rank,
                            MPI_INFO_NULL, &local) == MPI_SUCCESS) {
      MPI_Comm_size(local, &m.localSize);
      MPI_Comm_free(&local);
    }
  }
  Impl &m = *c->impl_;
  void *ub = nullptr;
  int flag = 0;
  if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag) ==
          MPI_SUCCESS &&
      flag)
    m.tagUB = *static_cast<int *>(ub);
  std::snprintf(gPrefix, sizeof(gPrefix), "%s: error: rank %d: ",
                m.program.c_str(), m.rank);
  // MPI_Init may have installed handlers of its own.
  sigaction(SIGTERM, &sa, nullptr);
  out = std::move(c);
  return Status::success();
}

MpiCommunicator::~MpiCommunicator() {
  Impl &m = *impl_;
  if (m.world)
    std::signal(SIGTERM, SIG_DFL);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return; // MPI reads no copies any more
  if (!m.posted.empty())
    m.abandonSends();
  if (m.comm != MPI_COMM_NULL)
    MPI_Comm_free(&m.comm);
  if (m.world) {
    // MPI_Finalize may wait for the other ranks too.
    BlockingDeadline deadline(
        m.timeout, timedOutLine(m.program, m.worldRank, m.timeout,
                                "MPI shut-down (MPI_Finalize)",
                                "a peer rank died or hung"));
    MPI_Finalize();
  }
}

int MpiCommunicator::rank() const { return impl_->rank; }
int MpiCommunicator::size() const { return impl_->size; }
int MpiCommunicator::localSize() const { return impl_->localSize; }
void MpiCommunicator::setTimeout(double seconds) { impl_->timeout = seconds; }
double MpiCommunicator::timeout() const { return impl_->timeout; }
void MpiCommunicator::setMaxChunkBytes(size_t bytes) {
  impl_->maxChunkBytes =
      std::max<size_t>(1, std::min<size_t>(bytes, INT32_MAX));
}
size_t MpiCommunicator::pendingSends() const { return impl_->posted.size(); }

Status MpiCommunicator::allReduce(void *data, size_t count, DType dtype,
                                  ReduceOp op, const std::string &what) {
  Status s = checkReduce(data, count, dtype, op, what);
  if (!s.ok() || count == 0)
    return s;
  const Impl &m = *impl_;
  auto until = m.deadline();
  if (isHalf(dtype)) {
    // f16/bf16: reduce in f32 and round once.
    std::vector<float> tmp(count);
    toF32(data, tmp.data(), count, dtype);
    s = m.allReduceRaw(tmp.data(), count, MPI_FLOAT, sizeof(float), mpiOp(op),
                       until, what);
    if (!s.ok())
      return s;
    if (op == ReduceOp::Mean)
      divide(tmp.data(), count, DType::F32, m.size);
    fromF32(tmp.data(), data, count, dtype);
    return s;
  }
  s = m.allReduceRaw(data, count, mpiType(dtype), dtypeSize(dtype), mpiOp(op),
                     until, what);
  if (s.ok() && op == ReduceOp::Mean)
    divide(data, count, dtype, m.size);
  return s;
}

Status MpiCommunicator::allGather(const void *send, void *recv,
                                  size_t countPerRank, DType dtype,
                                  const std::string &what) {
  const Impl &m = *impl_;
  size_t esize = dtypeSize(dtype);
  if (esize == 0)
    return Status::failure(what + ": unknown dtype");
  if (countPerRank > SIZE_MAX / esize / m.size)
    return Status::failure(what + ": " + std::to_string(countPerRank) +
                           " elements per rank overflow the address space");
  size_t bytes = countPerRank * esize, total = bytes * m.size;
  Status s = checkBuffer(send, bytes, what);
  if (s.ok())
    s = checkBuffer(recv, total, what);
  if (!s.ok() || bytes == 0)
    return s;
  char *out = static_cast<char *>(recv);
  const char *in = static_cast<const char *>(send);
  bool inPlace = in == out + m.rank * bytes;
  std::vector<char> copy;
  if (!inPlace && overlaps(in, bytes, out, total)) {
    copy.assign(in, in + bytes);
    in = copy.data();
  }
  auto until = m.deadline();
  if (bytes <= m.maxChunkBytes) {
    MPI_Request req;
    int n = static_cast<int>(bytes);
    int rc = MPI_Iallgather(inPlace ? MPI_IN_PLACE : in, n, MPI_BYTE, out, n,
                            MPI_BYTE, m.comm, &req);
    if (rc != MPI_SUCCESS)
      return m.mpiError(rc, what);
    return m.wait1(req, until, what);
  }
  // Chunk k gathers bytes [off, off + n) of every rank's slot.
  std::vector<char> tmp(m.maxChunkBytes * m.size);
  for (size_t off = 0; off < bytes; off += m.maxChunkBytes) {
    size_t n = std::min(m.maxChunkBytes, bytes - off);
    MPI_Request req;
    int rc = MPI_Iallgather(in + off, static_cast<int>(n), MPI_BYTE, tmp.data(),
                            static_cast<int>(n), MPI_BYTE, m.comm, &req);
    if (rc != MPI_SUCCESS)
      return m.mpiError(rc, what);
    if (!(s = m.wait1(req, until, what)).ok())
      return s;
    for (int r = 0; r < m.size; ++r)
      std::memcpy(out + r * bytes + off, tmp.data() + r * n, n);
  }
  return s;
}

Status MpiCommunicator::reduceScatter(const void *send, void *recv,
                                      size_t countPerRank, DType dtype,
                                      ReduceOp op, const std::string &what) {
  const Impl &m = *impl_;
  // checkReduce refuses counts whose size() slots overflow.
  Status s = checkReduce(send, countPerRank, dtype, op, what);
  size_t esize = dtypeSize(dtype);
  if (s.ok())
    s = checkBuffer(recv, countPerRank * esize, what);
  if (!s.ok() || countPerRank == 0)
    return s;
  auto until = m.deadline();
  size_t total = countPerRank * m.size;
  if (isHalf(dtype)) {
    std::vector<float> in(total), out(countPerRank);
    toF32(send, in.data(), total, dtype);
    s = m.reduceScatterRaw(in.data(), out.data(), countPerRank, MPI_FLOAT,
                           sizeof(float), mpiOp(op), until, what);
    if (!s.ok())
      return s;
    if (op == ReduceOp::Mean)
      divide(out.data(), countPerRank, DType::F32, m.size);
    fromF32(out.data(), recv, countPerRank, dtype);
    return s;
  }
  std::vector<char> copy;
  const char *in = static_cast<const char *>(send);
  if (overlaps(send, total * esize, recv, countPerRank * esize)) {
    copy.assign(in, in + total * esize);
    in = copy.data();
  }
  s = m.reduceScatterRaw(in, recv, countPerRank, mpiType(dtype), esize,
                         mpiOp(op), until, what);
  if (s.ok() && op == ReduceOp::Mean)
    divide(recv, countPerRank, dtype, m.size);
  return s;
}

Status MpiCommunicator::send(const void *data, size_t bytes, int peer,
                             int tag, const std::string &what) {
  const Impl &m = *impl_;
  Status s = checkPeer(peer, tag, "send to", what);
  if (s.ok())
    s = m.checkTag(tag, what);
  if (s.ok())
    s = checkBuffer(data, bytes, what);
  if (!s.ok())
    return s;
  auto until = m.deadline();
  const char *p = static_cast<const char *>(data);
  for (size_t k = 0; k < m.chunks(bytes); ++k) {
    MPI_Request req;
    int rc = MPI_Isend(p + k * m.maxChunkBytes, m.chunkBytes(bytes, k),
                       MPI_BYTE, peer, tag, m.comm, &req);
    if (rc != MPI_SUCCESS)
      return m.mpiError(rc, what);
    if (!(s = m.wait1(req, until, what)).ok())
      return s;
  }
  return s;
}

Status MpiCommunicator::recv(void *data, size_t bytes, int peer, int tag,
                             const std::string &what) {
  const Impl &m = *impl_;
  Status s = checkPeer(peer, tag, "receive from", what);
  if (s.ok())
    s = m.checkTag(tag, what);
  if (s.ok())
    s = checkBuffer(data, bytes, what);
  if (!s.ok())
    return s;
  auto until = m.deadline();
  char *p = static_cast<char *>(data);
  for (size_t k = 0; k < m.chunks(bytes); ++k) {
    MPI_Request req;
    MPI_Status st;
    st.MPI_ERROR = MPI_SUCCESS;
    int n = m.chunkBytes(bytes, k);
    int rc = MPI_Irecv(p + k * m.maxChunkBytes, n, MPI_BYTE, peer, tag, m.comm,
                       &req);
    if (rc != MPI_SUCCESS)
      return m.mpiError(rc, what);
    if (!(s = m.wait(&req, 1, &st, until, what)).ok()) {
      Status t = m.truncation(st.MPI_ERROR, peer, bytes, what);
      return t.ok() ? s : t;
    }
    if (!(s = m.checkReceived(st, n, peer, what)).ok())
      return s;
  }
  return s;
}

Status MpiCommunicator::sendRecv(const void *sendData, size_t sendBytes,
                                 int dest, void *recvData, size_t recvBytes,
                                 int source, int tag,
                                 const std::string &what) {
  const Impl &m = *impl_;
  Status s = checkPeer(dest, tag, "send to", what);
  if (s.ok())
    s = checkPeer(source, tag, "receive from", what);
  if (s.ok())
    s = m.checkTag(tag, what);
  if (s.ok())
    s = checkBuffer(sendData, sendBytes, what);
  if (s.ok())
    s = checkBuffer(recvData, recvBytes, what);
  if (!s.ok())
    return s;
  auto until = m.deadline();
  const char *out = static_cast<const char *>(sendData);
  char *in = static_cast<char *>(recvData);
  size_t ns = m.chunks(sendBytes), nr = m.chunks(recvBytes);
  for (size_t k = 0; k < std::max(ns, nr); ++k) {
    MPI_Request reqs[2];
    MPI_Status st[2];
    st[0].MPI_ERROR = st[1].MPI_ERROR = MPI_SUCCESS;
    int n = 0, recvAt = -1, got = m.chunkBytes(recvBytes, k);
    if (k < nr) {
      int rc = MPI_Irecv(in + k * m.maxChunkBytes, got, MPI_BYTE, source, tag,
                         m.comm, &reqs[n]);
      if (rc != MPI_SUCCESS)
        return m.mpiError(rc, what);
      recvAt = n++;
    }
    if (k < ns) {
      int rc = MPI_Isend(out + k * m.maxChunkBytes, m.chunkBytes(sendBytes, k),
                         MPI_BYTE, dest, tag, m.comm, &reqs[n]);
      if (rc != MPI_SUCCESS)
        return m.mpiError(rc, what);
      ++n;
    }
    if (!(s = m.wait(reqs, n, st, until, what)).ok()) {
      Status t = recvAt >= 0
                     ? m.truncation(st[recvAt].MPI_ERROR, source, recvBytes,
                                    what)
                     : Status::success();
      return t.ok() ? s : t;
    }
    if (recvAt >= 0 && !(s = m.checkReceived(st[recvAt], got, source, what))
                            .ok())
      return s;
  }
  return s;
}

Status MpiCommunicator::postSend(const void *data, size_t bytes, int peer,
                                 int tag, const std::string &what) {
  Impl &m = *impl_;
  Status s = checkPeer(peer, tag, "send to", what);
  if (s.ok())
    s = m.checkTag(tag, what);
  if (s.ok())
    s = checkBuffer(data, bytes, what);
  if (s.ok())
    s = m.reapSends();
  if (!s.ok())
    return s;
  Impl::PostedSend p;
  p.what = what;
  if (bytes) {
    p.copy.reset(new char[bytes]);
    std::memcpy(p.copy.get(), data, bytes);
  }
  size_t n = m.chunks(bytes);
  p.reqs.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    MPI_Request req;
    int rc =
        MPI_Isend(p.copy.get() + k * m.maxChunkBytes, m.chunkBytes(bytes, k),
                  MPI_BYTE, peer, tag, m.comm, &req);
    if (rc != MPI_SUCCESS) {
      s = m.mpiError(rc, what);
      break;
    }
    p.reqs.push_back(req);
  }
  // Chunks posted before an error still read the copy.
  if (!p.reqs.empty())
    m.posted.push_back(std::move(p));
  return s;
}

Status MpiCommunicator::completeSends(const std::string &what) {
  Impl &m = *impl_;
  auto until = m.deadline();
  Status first = Status::success();
  std::vector<MPI_Status> st;
  while (!m.posted.empty()) {
    Impl::PostedSend &p = m.posted.front();
    MPI_Status ok;
    ok.MPI_ERROR = MPI_SUCCESS;
    st.assign(p.reqs.size(), ok);
    Status s = m.wait(p.reqs.data(), static_cast<int>(p.reqs.size()), st.data(),
                      until, what + ": waiting for " + p.what);
    if (!s.ok()) {
      (void)p.copy.release(); // MPI may still read it
      if (first.ok())
        first = s;
    }
    m.posted.pop_front();
  }
  return first;
}

Status MpiCommunicator::createGroup(const std::vector<int> &ranks,
                                    std::unique_ptr<Communicator> &out,
                                    const std::string &what) {
  const Impl &m = *impl_;
  Status s = checkGroup(ranks, what);
  if (!s.ok())
    return s;
  MPI_Group all = MPI_GROUP_NULL, members = MPI_GROUP_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_group(m.comm, &all);
  if (rc == MPI_SUCCESS)
    rc = MPI_Group_incl(all, static_cast<int>(ranks.size()), ranks.data(),
                        &members);
  if (rc == MPI_SUCCESS) {
    // Blocks until the other members call it: bounded by a watchdog thread.
    WaitingIn marker(what);
    BlockingDeadline deadline(
        m.timeout, timedOutLine(m.program, m.worldRank, m.timeout, what,
                                "a member of the group did not create it: "
                                "it died or hung, or its program names "
                                "other groups"));
    rc = MPI_Comm_create_group(m.comm, members, 0, &comm);
  }
  if (members != MPI_GROUP_NULL)
    MPI_Group_free(&members);
  if (all != MPI_GROUP_NULL)
    MPI_Group_free(&all);
  if (rc != MPI_SUCCESS)
    return m.mpiError(rc, what);
  if (comm == MPI_COMM_NULL)
    return Status::failure(what + ": MPI made no communicator for rank " +
                           std::to_string(m.rank));
  std::unique_ptr<MpiCommunicator> c(new MpiCommunicator());
  Impl &g = *c->impl_;
  g.comm = comm;
  MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(g.comm, &g.rank);
  MPI_Comm_size(g.comm, &g.size);
  g.localSize = m.localSize;
  g.tagUB = m.tagUB;
  g.worldRank = m.worldRank;
  g.timeout = m.timeout;
  g.maxChunkBytes = m.maxChunkBytes;
  g.program = m.program;
  out = std::move(c);
  return Status::success();
}

Status MpiCommunicator::barrier(const std::string &what) {
  const Impl &m = *impl_;
  auto until = m.deadline();
  MPI_Request req;
  int rc = MPI_Ibarrier(m.comm, &req);
  if (rc != MPI_SUCCESS)
    return m.mpiError(rc, what);
  return m.wait1(req, until, what);
}

Status MpiCommunicator::broadcast(void *data, size_t bytes, int root,
                                  const std::string &what) {
  const Impl &m = *impl_;
  Status s = checkRoot(root, what);
  if (s.ok())
    s = checkBuffer(data, bytes, what);
  if (!s.ok() || bytes == 0)
    return s;
  auto until = m.deadline();
  char *p = static_cast<char *>(data);
  for (size_t k = 0; k < m.chunks(bytes); ++k) {
    MPI_Request req;
    int rc = MPI_Ibcast(p + k * m.maxChunkBytes, m.chunkBytes(bytes, k),
                        MPI_BYTE, root, m.comm, &req);
    if (rc != MPI_SUCCESS)
      return m.mpiError(rc, what);
    if (!(s = m.wait1(req, until, what)).ok())
      return s;
  }
  return s;
}

void MpiCommunicator::abort(int code) {
  gWaiting = 0;
  std::fflush(nullptr);
  MPI_Abort(MPI_COMM_WORLD, code);
  ::_exit(code);
}

} // namespace smprt
