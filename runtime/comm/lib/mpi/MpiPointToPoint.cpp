//===- MpiPointToPoint.cpp - send, recv, sendRecv, postSend ---------------===//
//
// Byte messages between two ranks, in chunks of maxChunkBytes; a receive of
// another size than expected is an error naming both ranks. postSend copies
// its message and returns at once; completeSends waits for those copies.
//
//===----------------------------------------------------------------------===//

#include "mpi/MpiInternal.h"

#include <algorithm>
#include <cstring>

namespace smprt {

Status MpiCommunicator::checkMessage(const void *data, size_t bytes, int peer,
                                     int tag, const char *verb,
                                     const std::string &what) const {
  Status s = checkPeer(peer, tag, verb, what);
  if (s.ok())
    s = impl_->checkTag(tag, what);
  return s.ok() ? checkBuffer(data, bytes, what) : s;
}

Status MpiCommunicator::send(const void *data, size_t bytes, int peer, int tag,
                             const std::string &what) {
  const Impl &m = *impl_;
  Status s = checkMessage(data, bytes, peer, tag, "send to", what);
  if (!s.ok())
    return s;
  const char *p = static_cast<const char *>(data);
  return m.eachChunk(bytes, m.maxChunkBytes, m.deadline(), what,
                     [&](size_t off, int n, MPI_Request *req) {
                       return MPI_Isend(p + off, n, MPI_BYTE, peer, tag, m.comm,
                                        req);
                     });
}

Status MpiCommunicator::recv(void *data, size_t bytes, int peer, int tag,
                             const std::string &what) {
  const Impl &m = *impl_;
  Status s = checkMessage(data, bytes, peer, tag, "receive from", what);
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
                                 int source, int tag, const std::string &what) {
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
      Status t = recvAt >= 0 ? m.truncation(st[recvAt].MPI_ERROR, source,
                                            recvBytes, what)
                             : Status::success();
      return t.ok() ? s : t;
    }
    if (recvAt >= 0 &&
        !(s = m.checkReceived(st[recvAt], got, source, what)).ok())
      return s;
  }
  return s;
}

Status MpiCommunicator::postSend(const void *data, size_t bytes, int peer,
                                 int tag, const std::string &what) {
  Impl &m = *impl_;
  Status s = checkMessage(data, bytes, peer, tag, "send to", what);
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

} // namespace smprt
