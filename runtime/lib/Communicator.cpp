//===- Communicator.cpp - Argument checks and the single-rank communicator ===//

#include "smprt/Communicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace smprt {

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Min:
    return "min";
  case ReduceOp::Mean:
    return "mean";
  }
  return "?";
}

bool parseReduceOp(const std::string &name, ReduceOp &op) {
  for (ReduceOp o :
       {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Mean})
    if (name == reduceOpName(o)) {
      op = o;
      return true;
    }
  return false;
}

Communicator::~Communicator() = default;

Status Communicator::checkBuffer(const void *data, size_t bytes,
                                 const std::string &what) const {
  if (bytes > 0 && !data)
    return Status::failure(what + ": null buffer for " +
                           std::to_string(bytes) + " bytes");
  return Status::success();
}

Status Communicator::checkReduce(const void *data, size_t count, DType dtype,
                                 ReduceOp op, const std::string &what) const {
  size_t esize = dtypeSize(dtype);
  if (esize == 0)
    return Status::failure(what + ": unknown dtype " +
                           std::to_string(static_cast<int>(dtype)));
  if (count > SIZE_MAX / esize / static_cast<size_t>(size()))
    return Status::failure(what + ": " + std::to_string(count) +
                           " elements overflow the address space");
  if (op == ReduceOp::Mean && !isFloat(dtype))
    return Status::failure(what + ": mean is defined for float tensors, not " +
                           dtypeName(dtype) + " (use sum)");
  if (dtype == DType::Bool && op == ReduceOp::Sum)
    return Status::failure(what + ": sum of bool tensors is not supported "
                                  "(max is 'any', min is 'all')");
  return checkBuffer(data, count * esize, what);
}

Status Communicator::checkPeer(int peer, int tag, const char *verb,
                               const std::string &what) const {
  if (peer < 0 || peer >= size())
    return Status::failure(what + ": cannot " + verb + " rank " +
                           std::to_string(peer) + ": the run has " +
                           std::to_string(size()) +
                           (size() == 1 ? " rank" : " ranks"));
  if (peer == rank())
    return Status::failure(what + ": rank " + std::to_string(rank()) +
                           " cannot " + verb + " itself");
  if (tag < 0)
    return Status::failure(what + ": tag " + std::to_string(tag) +
                           " is negative");
  return Status::success();
}

Status Communicator::checkRoot(int root, const std::string &what) const {
  if (root < 0 || root >= size())
    return Status::failure(what + ": root rank " + std::to_string(root) +
                           " does not exist; the run has " +
                           std::to_string(size()) +
                           (size() == 1 ? " rank" : " ranks"));
  return Status::success();
}

Status Communicator::checkGroup(const std::vector<int> &ranks,
                                const std::string &what) const {
  if (ranks.empty())
    return Status::failure(what + ": a group needs at least one rank");
  std::vector<bool> seen(static_cast<size_t>(size()), false);
  bool self = false;
  for (int r : ranks) {
    if (r < 0 || r >= size())
      return Status::failure(what + ": cannot put rank " + std::to_string(r) +
                             " in a group: the run has " +
                             std::to_string(size()) +
                             (size() == 1 ? " rank" : " ranks"));
    if (seen[r])
      return Status::failure(what + ": rank " + std::to_string(r) +
                             " is in the group twice");
    seen[r] = true;
    self |= r == rank();
  }
  if (!self) {
    std::string list;
    for (int r : ranks)
      list += (list.empty() ? "" : ", ") + std::to_string(r);
    return Status::failure(what + ": rank " + std::to_string(rank()) +
                           " is not in the group {" + list +
                           "} (only its members create a group)");
  }
  return Status::success();
}

// ---- LocalCommunicator --------------------------------------------------------

Status LocalCommunicator::allReduce(void *data, size_t count, DType dtype,
                                    ReduceOp op, const std::string &what) {
  // One rank: the sum, max and min are the values; the mean divides by 1.
  return checkReduce(data, count, dtype, op, what);
}

Status LocalCommunicator::allGather(const void *send, void *recv,
                                    size_t countPerRank, DType dtype,
                                    const std::string &what) {
  size_t bytes = countPerRank * dtypeSize(dtype);
  Status s = checkBuffer(send, bytes, what);
  if (s.ok())
    s = checkBuffer(recv, bytes, what);
  if (s.ok() && bytes && send != recv)
    std::memmove(recv, send, bytes);
  return s;
}

Status LocalCommunicator::reduceScatter(const void *send, void *recv,
                                        size_t countPerRank, DType dtype,
                                        ReduceOp op, const std::string &what) {
  Status s = checkReduce(send, countPerRank, dtype, op, what);
  size_t bytes = countPerRank * dtypeSize(dtype);
  if (s.ok())
    s = checkBuffer(recv, bytes, what);
  if (s.ok() && bytes && send != recv)
    std::memmove(recv, send, bytes);
  return s;
}

Status LocalCommunicator::send(const void *, size_t, int peer, int tag,
                               const std::string &what) {
  return checkPeer(peer, tag, "send to", what);
}

Status LocalCommunicator::recv(void *, size_t, int peer, int tag,
                               const std::string &what) {
  return checkPeer(peer, tag, "receive from", what);
}

Status LocalCommunicator::sendRecv(const void *, size_t, int dest, void *,
                                   size_t, int, int tag,
                                   const std::string &what) {
  return checkPeer(dest, tag, "send to", what);
}

Status LocalCommunicator::postSend(const void *, size_t, int peer, int tag,
                                   const std::string &what) {
  return checkPeer(peer, tag, "send to", what);
}

Status LocalCommunicator::completeSends(const std::string &) {
  return Status::success(); // nothing was posted
}

Status LocalCommunicator::createGroup(const std::vector<int> &ranks,
                                      std::unique_ptr<Communicator> &out,
                                      const std::string &what) {
  // One rank: the only group is {0}.
  Status s = checkGroup(ranks, what);
  if (s.ok())
    out = std::make_unique<LocalCommunicator>();
  return s;
}

Status LocalCommunicator::barrier(const std::string &) {
  return Status::success();
}

Status LocalCommunicator::broadcast(void *data, size_t bytes, int root,
                                    const std::string &what) {
  Status s = checkRoot(root, what);
  return s.ok() ? checkBuffer(data, bytes, what) : s;
}

void LocalCommunicator::abort(int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}

Communicator &localCommunicator() {
  static LocalCommunicator local;
  return local;
}

} // namespace smprt
