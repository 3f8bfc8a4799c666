//===- MpiCollectives.cpp - All-reduce, all-gather, reduce-scatter --------===//
//
// Reductions of f16/bf16 run in f32 and are rounded once; Mean is the sum
// divided by the ranks. Messages over maxChunkBytes go out in chunks (MPI
// counts are ints).
//
//===----------------------------------------------------------------------===//

#include "mpi/MpiInternal.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace smprt {
namespace {

/// The end of a reduction of `n` elements whose result is at `result`:
/// Mean divides it by the ranks, and f16/bf16 data, reduced in f32, is
/// rounded once into `out`.
void finish(void *result, size_t n, DType dtype, ReduceOp op, int ranks,
            void *out) {
  bool half = mpi::isHalf(dtype);
  if (op == ReduceOp::Mean)
    mpi::divide(result, n, half ? DType::F32 : dtype, ranks);
  if (half)
    mpi::fromF32(static_cast<const float *>(result), out, n, dtype);
}

} // namespace

Status MpiCommunicator::allReduce(void *data, size_t count, DType dtype,
                                  ReduceOp op, const std::string &what) {
  Status s = checkReduce(data, count, dtype, op, what);
  if (!s.ok() || count == 0)
    return s;
  const Impl &m = *impl_;
  auto until = m.deadline();
  if (mpi::isHalf(dtype)) {
    // f16/bf16: reduce in f32 and round once.
    std::vector<float> tmp(count);
    mpi::toF32(data, tmp.data(), count, dtype);
    s = m.allReduceRaw(tmp.data(), count, MPI_FLOAT, sizeof(float),
                       mpi::mpiOp(op), until, what);
    if (s.ok())
      finish(tmp.data(), count, dtype, op, m.size, data);
    return s;
  }
  s = m.allReduceRaw(data, count, mpi::mpiType(dtype), dtypeSize(dtype),
                     mpi::mpiOp(op), until, what);
  if (s.ok())
    finish(data, count, dtype, op, m.size, data);
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
  if (!inPlace && mpi::overlaps(in, bytes, out, total)) {
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
  if (mpi::isHalf(dtype)) {
    std::vector<float> in(total), out(countPerRank);
    mpi::toF32(send, in.data(), total, dtype);
    s = m.reduceScatterRaw(in.data(), out.data(), countPerRank, MPI_FLOAT,
                           sizeof(float), mpi::mpiOp(op), until, what);
    if (s.ok())
      finish(out.data(), countPerRank, dtype, op, m.size, recv);
    return s;
  }
  std::vector<char> copy;
  const char *in = static_cast<const char *>(send);
  if (mpi::overlaps(send, total * esize, recv, countPerRank * esize)) {
    copy.assign(in, in + total * esize);
    in = copy.data();
  }
  s = m.reduceScatterRaw(in, recv, countPerRank, mpi::mpiType(dtype), esize,
                         mpi::mpiOp(op), until, what);
  if (s.ok())
    finish(recv, countPerRank, dtype, op, m.size, recv);
  return s;
}

} // namespace smprt
