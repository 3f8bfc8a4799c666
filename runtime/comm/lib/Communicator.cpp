//===- Communicator.cpp - Reduce ops and the shared argument checks -------===//

#include "smprt/comm/Communicator.h"

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
    return Status::failure(what + ": null buffer for " + std::to_string(bytes) +
                           " bytes");
  return Status::success();
}

Status Communicator::checkCount(size_t count, DType dtype, const char *unit,
                                const std::string &what) const {
  size_t esize = dtypeSize(dtype);
  if (esize == 0)
    return Status::failure(what + ": unknown dtype " +
                           std::to_string(static_cast<int>(dtype)));
  if (count > SIZE_MAX / esize / static_cast<size_t>(size()))
    return Status::failure(what + ": " + std::to_string(count) + " " + unit +
                           " overflow the address space");
  return Status::success();
}

Status Communicator::checkPeerBuffer(const void *data, size_t bytes, int peer,
                                     int tag, const char *verb,
                                     const std::string &what) const {
  Status s = checkPeer(peer, tag, verb, what);
  return s.ok() ? checkBuffer(data, bytes, what) : s;
}

Status Communicator::checkReduce(const void *data, size_t count, DType dtype,
                                 ReduceOp op, const std::string &what) const {
  Status s = checkCount(count, dtype, "elements", what);
  if (!s.ok())
    return s;
  if (op == ReduceOp::Mean && !isFloat(dtype))
    return Status::failure(what + ": mean is defined for float tensors, not " +
                           dtypeName(dtype) + " (use sum)");
  if (dtype == DType::Bool && op == ReduceOp::Sum)
    return Status::failure(what + ": sum of bool tensors is not supported "
                                  "(max is 'any', min is 'all')");
  return checkBuffer(data, count * dtypeSize(dtype), what);
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

} // namespace smprt
