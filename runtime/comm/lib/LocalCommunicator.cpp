//===- LocalCommunicator.cpp - The communicator of a single-rank run ------===//
//
// Rank 0 of 1: reductions leave the values as they are (the mean of one
// value divides by 1), gathers copy, send/recv/postSend are errors ("the
// run has 1 rank", from the shared checks), its only group is {0}. Never
// touches MPI.
//
//===----------------------------------------------------------------------===//

#include "smprt/comm/Communicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace smprt {
namespace {

class LocalCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int localSize() const override { return 1; }
  const char *backend() const override { return "local"; }

  Status allReduce(void *data, size_t count, DType dtype, ReduceOp op,
                   const std::string &what) override {
    // One rank: the sum, max and min are the values; the mean divides by 1.
    return checkReduce(data, count, dtype, op, what);
  }

  Status allGather(const void *send, void *recv, size_t countPerRank,
                   DType dtype, const std::string &what) override {
    size_t bytes = countPerRank * dtypeSize(dtype);
    Status s = checkBuffer(send, bytes, what);
    if (s.ok())
      s = checkBuffer(recv, bytes, what);
    return s.ok() ? copy(send, recv, bytes) : s;
  }

  Status reduceScatter(const void *send, void *recv, size_t countPerRank,
                       DType dtype, ReduceOp op,
                       const std::string &what) override {
    Status s = checkReduce(send, countPerRank, dtype, op, what);
    size_t bytes = countPerRank * dtypeSize(dtype);
    if (s.ok())
      s = checkBuffer(recv, bytes, what);
    return s.ok() ? copy(send, recv, bytes) : s;
  }

  // Point to point: every peer is out of range in a run of one rank.
  Status send(const void *, size_t, int peer, int tag,
              const std::string &what) override {
    return checkPeer(peer, tag, "send to", what);
  }
  Status recv(void *, size_t, int peer, int tag,
              const std::string &what) override {
    return checkPeer(peer, tag, "receive from", what);
  }
  Status sendRecv(const void *, size_t, int dest, void *, size_t, int, int tag,
                  const std::string &what) override {
    return checkPeer(dest, tag, "send to", what);
  }
  Status postSend(const void *, size_t, int peer, int tag,
                  const std::string &what) override {
    return checkPeer(peer, tag, "send to", what);
  }
  Status completeSends(const std::string &) override {
    return Status::success(); // nothing was posted
  }

  Status createGroup(const std::vector<int> &ranks,
                     std::unique_ptr<Communicator> &out,
                     const std::string &what) override {
    // One rank: the only group is {0}.
    Status s = checkGroup(ranks, what);
    if (s.ok())
      out = makeLocalCommunicator();
    return s;
  }

  Status barrier(const std::string &) override { return Status::success(); }
  Status broadcast(void *data, size_t bytes, int root,
                   const std::string &what) override {
    Status s = checkRoot(root, what);
    return s.ok() ? checkBuffer(data, bytes, what) : s;
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(nullptr);
    std::_Exit(code);
  }

private:
  static Status copy(const void *send, void *recv, size_t bytes) {
    if (bytes && send != recv)
      std::memmove(recv, send, bytes);
    return Status::success();
  }
};

} // namespace

std::unique_ptr<Communicator> makeLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

Communicator &localCommunicator() {
  static LocalCommunicator local;
  return local;
}

} // namespace smprt
