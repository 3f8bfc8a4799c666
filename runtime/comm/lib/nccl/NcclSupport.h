//===- NcclSupport.h - What the NCCL communicator is built from -*- C++ -*-===//
//
// Private to runtime/comm/lib/nccl: NCCL's names for smp's types and
// reductions, the texts of its errors, the watchdog's pause between polls,
// and the stream-ordered copies of a communicator's memory pool (a posted
// message's, an input that overlaps the output).
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_COMM_NCCL_NCCLSUPPORT_H
#define SMPRT_COMM_NCCL_NCCLSUPPORT_H

#include "smprt/comm/Communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace smprt::nccl_support {

using Clock = std::chrono::steady_clock;

std::string secondsText(double s);
std::string cudaText(cudaError_t e);

/// NCCL's type for reducing `dtype`. NCCL has no 16-bit integers; Bool
/// (0 or 1) is u8, whose Max is 'any' and Min 'all' (checkReduce refuses Sum).
Status reduceType(DType dtype, ncclDataType_t &type, const std::string &what);
ncclRedOp_t reduceOp(ReduceOp op);

/// Whether two byte ranges share a byte.
bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes);

/// Between two polls: yields for the first 2 ms of a wait (short
/// collectives end there), then sleeps 0.2 ms at a time.
void pause(Clock::time_point start);

/// The first failure of several NCCL calls (ncclInProgress is no failure:
/// the group's end settles it).
ncclResult_t firstFailure(ncclResult_t a, ncclResult_t b);

/// `copy`: a stream-ordered copy of `bytes` at `src`, allocated on `stream`
/// from `pool`, which is made on the stream's device the first time (a pool
/// that keeps freed memory for the next step: the device's default pool
/// would give it back at every synchronization).
Status stageCopy(cudaMemPool_t &pool, cudaStream_t stream, const void *src,
                 size_t bytes, void *&copy, const std::string &what);

} // namespace smprt::nccl_support

#endif // SMPRT_COMM_NCCL_NCCLSUPPORT_H
