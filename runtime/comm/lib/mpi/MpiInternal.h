//===- MpiInternal.h - The state of an MPI communicator ---------*- C++ -*-===//
//
// Internal to runtime/comm/lib/mpi: MpiCommunicator::Impl (the MPI
// communicator, its limits and the messages of postSend) and the helpers
// that the lifecycle (MpiCommunicator.cpp), the collectives
// (MpiCollectives.cpp) and the point-to-point calls (MpiPointToPoint.cpp)
// share. Only these files include mpi.h.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_COMM_MPI_MPIINTERNAL_H
#define SMPRT_COMM_MPI_MPIINTERNAL_H

#include "mpi/MpiWatchdog.h"
#include "smprt/comm/MpiCommunicator.h"

#include <mpi.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace smprt {
namespace mpi {

/// The MPI type of `t`; MPI_DATATYPE_NULL for f16/bf16 (reduced in f32).
MPI_Datatype mpiType(DType t);
MPI_Op mpiOp(ReduceOp op);
std::string mpiErrorText(int rc);
/// The error of a completion call (MPI_Testall) over `n` requests: with
/// MPI_ERR_IN_STATUS, the first request's own error.
int firstError(int rc, const MPI_Status *statuses, int n);

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes);
bool isHalf(DType t);
/// f16/bf16 <-> f32 (the half dtypes are reduced in f32 and rounded once).
void toF32(const void *src, float *dst, size_t n, DType t);
void fromF32(const float *src, void *dst, size_t n, DType t);
/// The mean of a sum over `ranks` ranks (float dtypes).
void divide(void *data, size_t n, DType t, int ranks);

} // namespace mpi

struct MpiCommunicator::Impl {
  using Clock = mpi::Clock;

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
                           std::to_string(worldRank) + ": " +
                           mpi::mpiErrorText(rc));
  }

  /// Prints the watchdog's line and ends every rank (MPI_Abort).
  [[noreturn]] void timedOut(const std::string &what) const;

  /// Polls `n` requests until they complete; past `until`, ends the run.
  Status wait(MPI_Request *reqs, int n, MPI_Status *statuses,
              Clock::time_point until, const std::string &what) const;
  Status wait1(MPI_Request &req, Clock::time_point until,
               const std::string &what) const {
    return wait(&req, 1, nullptr, until, what);
  }

  /// Posts one non-blocking call per chunk of `count` items, `chunk` at a
  /// time (`post(off, n, req)` posts items [off, off + n)), and waits for
  /// each before posting the next. One call (of 0 items) when count is 0.
  template <typename Post>
  Status eachChunk(size_t count, size_t chunk, Clock::time_point until,
                   const std::string &what, Post post) const {
    size_t off = 0;
    do {
      size_t n = std::min(chunk, count - off);
      MPI_Request req;
      int rc = post(off, static_cast<int>(n), &req);
      if (rc != MPI_SUCCESS)
        return mpiError(rc, what);
      Status s = wait1(req, until, what);
      if (!s.ok())
        return s;
      off += n;
    } while (off < count);
    return Status::success();
  }

  /// MPI_Iallreduce in place, `maxChunkBytes` at a time.
  Status allReduceRaw(void *data, size_t count, MPI_Datatype type, size_t esize,
                      MPI_Op op, Clock::time_point until,
                      const std::string &what) const;
  /// MPI_Ireduce_scatter_block; `send` must not overlap `recv`.
  Status reduceScatterRaw(const void *send, void *recv, size_t count,
                          MPI_Datatype type, size_t esize, MPI_Op op,
                          Clock::time_point until,
                          const std::string &what) const;

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
    return off >= bytes
               ? 0
               : static_cast<int>(std::min(maxChunkBytes, bytes - off));
  }

  /// Checks what one receive got.
  Status checkReceived(const MPI_Status &st, int expected, int source,
                       const std::string &what) const;
  /// The error of a receive that got more than `bytes` bytes (success for
  /// any other error).
  Status truncation(int rc, int source, size_t bytes,
                    const std::string &what) const;

  /// Releases the posted sends that have completed, whichever order they
  /// completed in; returns the error of the first that failed. A failed
  /// send's copy is left to MPI (it may still be reading it).
  Status reapSends();
  /// When the communicator is destroyed: gives the posted sends a moment to
  /// complete, then leaves the rest to MPI (MPI_Request_free) with their
  /// copies, which it may still read.
  void abandonSends();
};

} // namespace smprt

#endif // SMPRT_COMM_MPI_MPIINTERNAL_H
