//===- MpiImpl.cpp - Waits, chunks and helpers of the MPI communicator ----===//

#include "mpi/MpiInternal.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sched.h>
#include <unistd.h>

namespace smprt {
namespace mpi {

MPI_Datatype mpiType(DType t) {
  // Bool is one byte per element, 0 or 1; f16/bf16 are reduced in f32.
  static const struct {
    DType dtype;
    MPI_Datatype type;
  } kTypes[] = {
      {DType::F32, MPI_FLOAT},    {DType::F64, MPI_DOUBLE},
      {DType::Bool, MPI_UINT8_T}, {DType::U8, MPI_UINT8_T},
      {DType::I8, MPI_INT8_T},    {DType::I16, MPI_INT16_T},
      {DType::I32, MPI_INT32_T},  {DType::I64, MPI_INT64_T},
      {DType::U16, MPI_UINT16_T}, {DType::U32, MPI_UINT32_T},
      {DType::U64, MPI_UINT64_T},
  };
  for (const auto &e : kTypes)
    if (e.dtype == t)
      return e.type;
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
  std::transform(s, s + n, dst, t == DType::F16 ? halfToFloat : bf16ToFloat);
}

void fromF32(const float *src, void *dst, size_t n, DType t) {
  std::transform(src, src + n, static_cast<uint16_t *>(dst),
                 t == DType::F16 ? floatToHalf : floatToBf16);
}

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

int firstError(int rc, const MPI_Status *statuses, int n) {
  if (rc == MPI_ERR_IN_STATUS && statuses)
    for (int i = 0; i < n; ++i)
      if (statuses[i].MPI_ERROR != MPI_SUCCESS &&
          statuses[i].MPI_ERROR != MPI_ERR_PENDING)
        return statuses[i].MPI_ERROR;
  return rc;
}

} // namespace mpi

void MpiCommunicator::Impl::timedOut(const std::string &what) const {
  mpi::stopReportingWait();
  std::fflush(stdout);
  std::fprintf(stderr,
               "%s: error: rank %d: timed out after %g s in %s (a peer rank "
               "died or hung)\n",
               program.c_str(), worldRank, timeout, what.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  ::_exit(1);
}

Status MpiCommunicator::Impl::wait(MPI_Request *reqs, int n,
                                   MPI_Status *statuses,
                                   Clock::time_point until,
                                   const std::string &what) const {
  mpi::WaitingIn marker(what);
  auto spinUntil = Clock::now() + std::chrono::milliseconds(2);
  for (;;) {
    int done = 0;
    int rc =
        MPI_Testall(n, reqs, &done, statuses ? statuses : MPI_STATUSES_IGNORE);
    rc = mpi::firstError(rc, statuses, n);
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

Status MpiCommunicator::Impl::allReduceRaw(void *data, size_t count,
                                           MPI_Datatype type, size_t esize,
                                           MPI_Op op, Clock::time_point until,
                                           const std::string &what) const {
  char *p = static_cast<char *>(data);
  return eachChunk(count, std::max<size_t>(1, maxChunkBytes / esize), until,
                   what, [&](size_t off, int n, MPI_Request *req) {
                     return MPI_Iallreduce(MPI_IN_PLACE, p + off * esize, n,
                                           type, op, comm, req);
                   });
}

Status MpiCommunicator::Impl::reduceScatterRaw(const void *send, void *recv,
                                               size_t count, MPI_Datatype type,
                                               size_t esize, MPI_Op op,
                                               Clock::time_point until,
                                               const std::string &what) const {
  size_t chunk = std::max<size_t>(1, maxChunkBytes / esize);
  const char *in = static_cast<const char *>(send);
  char *out = static_cast<char *>(recv);
  if (count <= chunk)
    return eachChunk(
        count, chunk, until, what, [&](size_t, int n, MPI_Request *req) {
          return MPI_Ireduce_scatter_block(in, out, n, type, op, comm, req);
        });
  // Chunk k reduces elements [off, off + n) of every rank's slot.
  std::vector<char> tmp(chunk * esize * size);
  return eachChunk(count, chunk, until, what,
                   [&](size_t off, int n, MPI_Request *req) {
                     size_t bytes = static_cast<size_t>(n) * esize;
                     for (int r = 0; r < size; ++r)
                       std::memcpy(tmp.data() + r * bytes,
                                   in + (r * count + off) * esize, bytes);
                     return MPI_Ireduce_scatter_block(
                         tmp.data(), out + off * esize, n, type, op, comm, req);
                   });
}

Status MpiCommunicator::Impl::checkReceived(const MPI_Status &st, int expected,
                                            int source,
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

Status MpiCommunicator::Impl::truncation(int rc, int source, size_t bytes,
                                         const std::string &what) const {
  int cls = 0;
  MPI_Error_class(rc, &cls);
  if (cls == MPI_ERR_TRUNCATE)
    return Status::failure(what + ": rank " + std::to_string(source) +
                           " sent more than the " + std::to_string(bytes) +
                           " bytes rank " + std::to_string(rank) + " expected");
  return Status::success();
}

Status MpiCommunicator::Impl::reapSends() {
  Status s = Status::success();
  std::vector<MPI_Status> st;
  size_t keep = 0;
  for (size_t i = 0; i < posted.size(); ++i) {
    PostedSend &p = posted[i];
    int n = static_cast<int>(p.reqs.size()), done = 0;
    MPI_Status ok;
    ok.MPI_ERROR = MPI_SUCCESS;
    st.assign(p.reqs.size(), ok);
    int rc = mpi::firstError(MPI_Testall(n, p.reqs.data(), &done, st.data()),
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

void MpiCommunicator::Impl::abandonSends() {
  auto until =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(std::max(0.0, std::min(timeout, 1.0))));
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

} // namespace smprt
