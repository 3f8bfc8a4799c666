//===- NcclSupport.cpp - What the NCCL communicator is built from --------===//
//
// See NcclSupport.h.
//
//===----------------------------------------------------------------------===//

#include "NcclSupport.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sched.h>
#include <thread>

namespace smprt::nccl_support {

std::string secondsText(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

std::string cudaText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

Status reduceType(DType dtype, ncclDataType_t &type, const std::string &what) {
  static const int types[] = {
      // by DType's value
      ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16, ncclUint8,
      ncclInt8,    -1 /*i16*/,  ncclInt32,   ncclInt64,    ncclUint8,
      -1 /*u16*/,  ncclUint32,  ncclUint64};
  static_assert(static_cast<int>(DType::U64) == 12, "one entry per DType");
  size_t i = static_cast<size_t>(dtype);
  if (i < sizeof(types) / sizeof(types[0]) && types[i] >= 0) {
    type = static_cast<ncclDataType_t>(types[i]);
    return Status::success();
  }
  return Status::failure(what + ": NCCL cannot reduce " + dtypeName(dtype) +
                         " tensors (it has no 16-bit integer type)");
}

ncclRedOp_t reduceOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Max:
    return ncclMax;
  case ReduceOp::Min:
    return ncclMin;
  case ReduceOp::Mean:
    return ncclAvg;
  case ReduceOp::Sum:
    break;
  }
  return ncclSum;
}

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return aBytes && bBytes && pa < pb + bBytes && pb < pa + aBytes;
}

void pause(Clock::time_point start) {
  if (Clock::now() - start < std::chrono::milliseconds(2))
    sched_yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(200));
}

ncclResult_t firstFailure(ncclResult_t a, ncclResult_t b) {
  return a != ncclSuccess && a != ncclInProgress ? a : b;
}

Status stageCopy(cudaMemPool_t &pool, cudaStream_t stream, const void *src,
                 size_t bytes, void *&copy, const std::string &what) {
  copy = nullptr;
  cudaError_t e = cudaSuccess;
  if (!pool) {
    int device = -1;
    e = cudaStreamGetDevice(stream, &device);
    cudaMemPoolProps props;
    std::memset(&props, 0, sizeof(props));
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    if (e == cudaSuccess)
      e = cudaMemPoolCreate(&pool, &props);
    if (e == cudaSuccess) {
      uint64_t keep = UINT64_MAX; // cuuint64_t
      e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    if (e != cudaSuccess && pool) {
      cudaMemPoolDestroy(pool);
      pool = nullptr;
    }
    if (e != cudaSuccess)
      return Status::failure(what +
                             ": cannot create the NCCL communicator's "
                             "memory pool: " +
                             cudaText(e));
  }
  e = cudaMallocFromPoolAsync(&copy, bytes, pool, stream);
  if (e != cudaSuccess) {
    copy = nullptr;
    return Status::failure(what + ": cannot allocate " + std::to_string(bytes) +
                           " bytes on the device for a copy: " + cudaText(e));
  }
  e = cudaMemcpyAsync(copy, src, bytes, cudaMemcpyDeviceToDevice, stream);
  if (e != cudaSuccess) {
    cudaFreeAsync(copy, stream);
    copy = nullptr;
    return Status::failure(what + ": cannot copy " + std::to_string(bytes) +
                           " bytes on the device: " + cudaText(e));
  }
  return Status::success();
}

} // namespace smprt::nccl_support
