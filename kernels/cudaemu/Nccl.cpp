//===- Nccl.cpp - NCCL of one rank in the emulator ------------------------===//
//
// The NCCL calls of runtime/comm/lib/nccl, for a communicator of one rank
// (the emulator is one process: a communicator of more ranks is refused
// with ncclInvalidUsage). Collectives are copies (one rank's sum, average,
// min and max are its own values); a send to itself is matched with the
// receive of the same group at ncclGroupEnd, in order, as NCCL does. Every
// buffer must be device memory holding the bytes the call names.
//
//===----------------------------------------------------------------------===//

#include "State.h"

#include <nccl.h>

#include <cstring>
#include <deque>
#include <string>

using namespace smp::cudaemu;

struct ncclComm {
  int magic = 0x6e63;
  std::string lastError;
};

namespace {

struct PointToPoint {
  void *buffer;
  size_t bytes;
};

thread_local int groupDepth = 0;
thread_local std::deque<PointToPoint> sends, recvs;
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

ncclResult_t copy(const char *call, const void *send, void *recv,
                  size_t count, ncclDataType_t type, ncclComm_t comm) {
  if (!comm || comm->magic != 0x6e63)
    return failed(ncclInvalidArgument, std::string(call) + ": no communicator");
  size_t bytes = count * typeSize(type);
  if (typeSize(type) == 0)
    return failed(ncclInvalidArgument, std::string(call) + ": data type");
  if (ncclResult_t r = checkBuffer(call, "send", send, bytes))
    return r;
  if (ncclResult_t r = checkBuffer(call, "receive", recv, bytes))
    return r;
  if (bytes && send != recv)
    std::memmove(recv, send, bytes);
  return ncclSuccess;
}

ncclResult_t matchPointToPoint() {
  while (!sends.empty() && !recvs.empty()) {
    PointToPoint s = sends.front(), r = recvs.front();
    sends.pop_front();
    recvs.pop_front();
    if (s.bytes != r.bytes)
      return failed(ncclInvalidUsage,
                    "a send of " + std::to_string(s.bytes) +
                        " bytes to itself meets a receive of " +
                        std::to_string(r.bytes));
    if (s.bytes)
      std::memmove(r.buffer, s.buffer, s.bytes);
  }
  if (!sends.empty() || !recvs.empty()) {
    sends.clear();
    recvs.clear();
    return failed(ncclInvalidUsage,
                  "a send or receive to itself without its partner in the "
                  "same group (a real run would hang)");
  }
  return ncclSuccess;
}

} // namespace

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  std::memset(id, 0, sizeof(*id));
  std::memcpy(id->internal, "smp-cudaemu", 11);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId,
                              int rank) {
  if (nranks != 1 || rank != 0)
    return failed(ncclInvalidUsage,
                  "the CUDA emulator runs communicators of one rank, not " +
                      std::to_string(nranks));
  *comm = new ncclComm;
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *) {
  return ncclCommInitRank(comm, nranks, id, rank);
}

ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t *asyncError) {
  *asyncError = ncclSuccess;
  return ncclSuccess;
}
ncclResult_t ncclCommCount(const ncclComm_t, int *count) {
  *count = 1;
  return ncclSuccess;
}
ncclResult_t ncclCommUserRank(const ncclComm_t, int *rank) {
  *rank = 0;
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
                           ncclDataType_t type, ncclRedOp_t, ncclComm_t comm,
                           cudaStream_t) {
  return copy("ncclAllReduce", send, recv, count, type, comm);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t) {
  if (root != 0)
    return failed(ncclInvalidArgument, "ncclBroadcast: root outside 1 rank");
  return copy("ncclBroadcast", send, recv, count, type, comm);
}
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t) {
  return copy("ncclAllGather", send, recv, count, type, comm);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ncclRedOp_t,
                               ncclComm_t comm, cudaStream_t) {
  return copy("ncclReduceScatter", send, recv, count, type, comm);
}

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type,
                      int peer, ncclComm_t, cudaStream_t) {
  size_t bytes = count * typeSize(type);
  if (peer != 0)
    return failed(ncclInvalidArgument, "ncclSend: peer outside 1 rank");
  if (ncclResult_t r = checkBuffer("ncclSend", "send", send, bytes))
    return r;
  sends.push_back({const_cast<void *>(send), bytes});
  return groupDepth ? ncclSuccess : matchPointToPoint();
}
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t, cudaStream_t) {
  size_t bytes = count * typeSize(type);
  if (peer != 0)
    return failed(ncclInvalidArgument, "ncclRecv: peer outside 1 rank");
  if (ncclResult_t r = checkBuffer("ncclRecv", "receive", recv, bytes))
    return r;
  recvs.push_back({recv, bytes});
  return groupDepth ? ncclSuccess : matchPointToPoint();
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
  return matchPointToPoint();
}

} // extern "C"
