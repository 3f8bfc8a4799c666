//===- Runtime.cpp - The CUDA runtime API of the emulator -----------------===//
//
// The cudart functions smp calls, on host memory: allocations come from
// State.cpp (device memory is host memory the emulator tracks), and each
// call checks what the real runtime would refuse: a copy whose direction
// does not match its pointers, a range past the end of an allocation, a
// free of memory it did not allocate, a device that does not exist. Work
// (asynchronous copies and memsets, stream-ordered frees) is issued on its
// stream through Streams.cpp, which has the stream and event calls: by
// default it runs when it is issued (every synchronization then has
// nothing left to wait for); under SMP_CUDAEMU_DEFER the streams of the
// priority chosen queue it until something needs it (a synchronization, a
// wait of another stream, a synchronous copy), so that a missing wait
// between streams reads stale data. The checks are made when the work is
// issued either way.
//
//===----------------------------------------------------------------------===//

#include "State.h"
#include "Streams.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>

using namespace smp::cudaemu;

namespace {

/// A memory pool's accounting, as cudaMemPoolGetAttribute reports it: the
/// bytes its allocations hold now and at most, and the bytes it maps
/// (reserved). The emulator's pool keeps what it mapped, as smp's default
/// pools are told to (a release threshold of UINT64_MAX): reserved memory
/// is the most ever used at once. (The allocations themselves are made and
/// freed like cudaMalloc's, so cudaMemGetInfo does not count the mapped
/// memory a real pool keeps.)
struct EmuPool {
  int device;
  uint64_t used = 0, usedHigh = 0, reserved = 0, reservedHigh = 0;
  void add(uint64_t bytes) {
    used += bytes;
    usedHigh = std::max(usedHigh, used);
    reserved = std::max(reserved, used);
    reservedHigh = std::max(reservedHigh, reserved);
  }
};
std::mutex poolMutex;
/// Every pool (default and created), for cudaMemGetInfo.
std::set<EmuPool *> &allPools() {
  static std::set<EmuPool *> pools;
  return pools;
}
/// Which pool each stream-ordered allocation came from, and its size.
std::map<void *, std::pair<EmuPool *, uint64_t>> &poolAllocations() {
  static std::map<void *, std::pair<EmuPool *, uint64_t>> m;
  return m;
}
/// Each device's default pool: one EmuPool per device, never freed.
EmuPool &defaultPool(int device) {
  static std::map<int, EmuPool> pools;
  std::lock_guard<std::mutex> lock(poolMutex);
  auto [it, made] = pools.try_emplace(device, EmuPool{device});
  if (made)
    allPools().insert(&it->second);
  return it->second;
}

thread_local int currentDevice = 0;

} // namespace

int smp::cudaemu::emuCurrentDevice() { return currentDevice; }

namespace {

int deviceCount() {
  static const int n = [] {
    const char *v = std::getenv("SMP_CUDAEMU_DEVICES");
    int d = v ? std::atoi(v) : 1;
    return d < 0 ? 0 : d;
  }();
  return n;
}

cudaError_t fail(cudaError_t e, const std::string &why) {
  report(why);
  setError(e);
  return e;
}

std::string hex(const void *p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

/// [p, p + bytes) inside one allocation of `kind`.
bool inside(const void *p, size_t bytes, MemoryKind kind) {
  Allocation a;
  return findAllocation(p, bytes, a) && a.kind == kind;
}
/// Not device memory (pageable or pinned host memory).
bool onHost(const void *p) {
  Allocation a;
  return !findAllocation(p, 0, a) || a.kind == MemoryKind::PinnedHost;
}

cudaError_t checkCopy(void *dst, const void *src, size_t n,
                      cudaMemcpyKind kind, const char *what) {
  std::string at = std::string(what) + " of " + std::to_string(n) +
                   " bytes from " + hex(src) + " to " + hex(dst);
  bool dDev = inside(dst, n, MemoryKind::Device);
  bool sDev = inside(src, n, MemoryKind::Device);
  switch (kind) {
  case cudaMemcpyHostToDevice:
    if (!dDev || !onHost(src))
      return fail(cudaErrorInvalidValue,
                  at + ": cudaMemcpyHostToDevice needs a host source and a "
                       "device destination with room for the bytes");
    break;
  case cudaMemcpyDeviceToHost:
    if (!sDev || !onHost(dst))
      return fail(cudaErrorInvalidValue,
                  at + ": cudaMemcpyDeviceToHost needs a device source with "
                       "the bytes and a host destination");
    break;
  case cudaMemcpyDeviceToDevice:
    if (!dDev || !sDev)
      return fail(cudaErrorInvalidValue,
                  at + ": cudaMemcpyDeviceToDevice needs both in device "
                       "memory with room for the bytes");
    break;
  case cudaMemcpyHostToHost:
    if (!onHost(dst) || !onHost(src))
      return fail(cudaErrorInvalidValue,
                  at + ": cudaMemcpyHostToHost with device memory");
    break;
  case cudaMemcpyDefault: {
    Allocation a;
    if ((findAllocation(dst, 0, a) && !findAllocation(dst, n, a)) ||
        (findAllocation(src, 0, a) && !findAllocation(src, n, a)))
      return fail(cudaErrorInvalidValue,
                  at + ": the range runs past the end of its allocation");
    break;
  }
  default:
    return fail(cudaErrorInvalidMemcpyDirection, at + ": unknown direction");
  }
  return cudaSuccess;
}

cudaError_t checkDevice(int d) {
  return d >= 0 && d < deviceCount() ? cudaSuccess : cudaErrorInvalidDevice;
}

} // namespace

extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
  *count = deviceCount();
  return deviceCount() > 0 ? cudaSuccess : cudaErrorNoDevice;
}

cudaError_t cudaSetDevice(int device) {
  if (cudaError_t e = checkDevice(device); e != cudaSuccess)
    return fail(e, "cudaSetDevice(" + std::to_string(device) + ")");
  currentDevice = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = currentDevice;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void **devPtr, size_t size) {
  if (cudaError_t e = refuseDuringCapture("cudaMalloc"))
    return e;
  *devPtr = allocate(size, MemoryKind::Device);
  return *devPtr ? cudaSuccess : cudaErrorMemoryAllocation;
}

/// cudaFree synchronizes the device first, as cudart's does: no queued
/// work may touch the memory once it is gone.
cudaError_t cudaFree(void *devPtr) {
  if (!devPtr)
    return cudaSuccess;
  if (cudaError_t e = refuseDuringCapture("cudaFree"))
    return e;
  runAll();
  if (!release(devPtr, MemoryKind::Device))
    return fail(cudaErrorInvalidValue,
                "cudaFree(" + hex(devPtr) +
                    "): not the start of a device allocation");
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void **ptr, size_t size) {
  if (cudaError_t e = refuseDuringCapture("cudaMallocHost"))
    return e;
  *ptr = allocate(size, MemoryKind::PinnedHost);
  return *ptr ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFreeHost(void *ptr) {
  if (!ptr)
    return cudaSuccess;
  if (cudaError_t e = refuseDuringCapture("cudaFreeHost"))
    return e;
  runAll();
  if (!release(ptr, MemoryKind::PinnedHost))
    return fail(cudaErrorInvalidValue,
                "cudaFreeHost(" + hex(ptr) +
                    "): not the start of a pinned host allocation");
  return cudaSuccess;
}

cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size,
                                    cudaMemPool_t memPool,
                                    cudaStream_t stream) {
  // Captured: the graph's own memory (not the pool's), the same address on
  // every launch of the graph, given back when the graph goes.
  if (std::shared_ptr<GraphBody> body = capturedBody(stream)) {
    auto &freed = body->freed;
    auto best = freed.end();
    for (auto it = freed.begin(); it != freed.end(); ++it)
      if (it->stream == stream && it->bytes >= size &&
          (best == freed.end() || it->bytes < best->bytes))
        best = it;
    if (best != freed.end()) {
      *ptr = best->p;
      freed.erase(best);
      return cudaSuccess;
    }
    if (!(*ptr = allocate(size, MemoryKind::Device)))
      return cudaErrorMemoryAllocation;
    body->memory.emplace_back(*ptr, size);
    body->memoryBytes += size;
    graphMemoryChanged(static_cast<int64_t>(size));
    return cudaSuccess;
  }
  if (cudaError_t e = cudaMalloc(ptr, size))
    return e;
  auto *pool = reinterpret_cast<EmuPool *>(memPool);
  std::lock_guard<std::mutex> lock(poolMutex);
  pool->add(size);
  poolAllocations()[*ptr] = {pool, size};
  return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
  return cudaMallocFromPoolAsync(
      devPtr, size,
      reinterpret_cast<cudaMemPool_t>(&defaultPool(currentDevice)), stream);
}

/// Checked when issued; the memory goes (and its pool's count of it) when
/// the stream's work reaches the free.
cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) {
  if (!devPtr)
    return cudaSuccess;
  Allocation a;
  if (!findAllocation(devPtr, 0, a) || a.kind != MemoryKind::Device ||
      a.base != reinterpret_cast<uintptr_t>(devPtr))
    return fail(cudaErrorInvalidValue,
                "cudaFreeAsync(" + hex(devPtr) +
                    "): not the start of a device allocation");
  // A captured free of the capture's own allocation: the memory stays the
  // graph's (its launches use the same address) until the graph goes, and
  // a later allocation of the capture on this stream may take it.
  if (std::shared_ptr<GraphBody> body = capturedBody(stream)) {
    for (const auto &[p, bytes] : body->memory)
      if (p == devPtr) {
        body->freed.push_back({devPtr, bytes, stream});
        return cudaSuccess;
      }
  }
  enqueueWork(stream, [devPtr] {
    {
      std::lock_guard<std::mutex> lock(poolMutex);
      auto it = poolAllocations().find(devPtr);
      if (it != poolAllocations().end()) {
        it->second.first->used -= it->second.second;
        poolAllocations().erase(it);
      }
    }
    if (!release(devPtr, MemoryKind::Device))
      fail(cudaErrorInvalidValue, "cudaFreeAsync(" + hex(devPtr) +
                                      "): freed twice (it was already gone "
                                      "when the stream reached the free)");
  });
  return cudaSuccess;
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool,
                              const struct cudaMemPoolProps *props) {
  if (!props || checkDevice(props->location.id) != cudaSuccess)
    return fail(cudaErrorInvalidValue, "cudaMemPoolCreate: bad properties");
  auto *pool = new EmuPool{props->location.id};
  {
    std::lock_guard<std::mutex> lock(poolMutex);
    allPools().insert(pool);
  }
  *memPool = reinterpret_cast<cudaMemPool_t>(pool);
  return cudaSuccess;
}

cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
  auto *pool = reinterpret_cast<EmuPool *>(memPool);
  {
    std::lock_guard<std::mutex> lock(poolMutex);
    auto &all = poolAllocations();
    for (auto it = all.begin(); it != all.end();)
      it = it->second.first == pool ? all.erase(it) : std::next(it);
    allPools().erase(pool);
  }
  delete pool;
  return cudaSuccess;
}

/// The release threshold is accepted and changes nothing (the pool keeps
/// what it maps); a high-water attribute is started again from the current
/// value when set to 0, as cudart allows; other values are refused.
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t memPool,
                                    enum cudaMemPoolAttr attr, void *value) {
  auto *pool = reinterpret_cast<EmuPool *>(memPool);
  if (!pool || !value)
    return fail(cudaErrorInvalidValue, "cudaMemPoolSetAttribute: null");
  if (attr != cudaMemPoolAttrUsedMemHigh &&
      attr != cudaMemPoolAttrReservedMemHigh)
    return cudaSuccess;
  if (*static_cast<uint64_t *>(value) != 0)
    return fail(cudaErrorInvalidValue,
                "cudaMemPoolSetAttribute: a high-water mark can only be "
                "reset (to 0)");
  std::lock_guard<std::mutex> lock(poolMutex);
  if (attr == cudaMemPoolAttrUsedMemHigh)
    pool->usedHigh = pool->used;
  else
    pool->reservedHigh = pool->reserved;
  return cudaSuccess;
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool,
                                    enum cudaMemPoolAttr attr, void *value) {
  auto *pool = reinterpret_cast<EmuPool *>(memPool);
  if (!pool || !value)
    return fail(cudaErrorInvalidValue, "cudaMemPoolGetAttribute: null");
  std::lock_guard<std::mutex> lock(poolMutex);
  uint64_t v;
  switch (attr) {
  case cudaMemPoolAttrUsedMemCurrent:
    v = pool->used;
    break;
  case cudaMemPoolAttrUsedMemHigh:
    v = pool->usedHigh;
    break;
  case cudaMemPoolAttrReservedMemCurrent:
    v = pool->reserved;
    break;
  case cudaMemPoolAttrReservedMemHigh:
    v = pool->reservedHigh;
    break;
  default:
    return fail(cudaErrorInvalidValue,
                "cudaMemPoolGetAttribute: an attribute the emulator does not "
                "keep (" +
                    std::to_string(static_cast<int>(attr)) + ")");
  }
  *static_cast<uint64_t *>(value) = v;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device) {
  if (!memPool || checkDevice(device) != cudaSuccess)
    return fail(cudaErrorInvalidValue,
                "cudaDeviceGetDefaultMemPool: bad device");
  *memPool = reinterpret_cast<cudaMemPool_t>(&defaultPool(device));
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                       enum cudaMemcpyKind kind) {
  if (cudaError_t e = checkCopy(dst, src, count, kind, "cudaMemcpy"))
    return e;
  if (cudaError_t e = refuseDuringCapture("cudaMemcpy"))
    return e;
  countHostWait();
  runLegacy(); // the null stream's copy: after the blocking streams' work
  if (count)
    std::memmove(dst, src, count);
  return stickyError();
}

/// Checked when issued, run in the stream's order; a copy from or to
/// pageable memory (not the emulator's) runs at once, after the stream's
/// work before it: cudart stages pageable memory before it returns.
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                            enum cudaMemcpyKind kind, cudaStream_t stream) {
  if (cudaError_t e = checkCopy(dst, src, count, kind, "cudaMemcpyAsync"))
    return e;
  if (!count)
    return cudaSuccess;
  Allocation a;
  bool pageable = !findAllocation(dst, 0, a) || !findAllocation(src, 0, a);
  // A graph's copy reads its source when the graph runs, long after a
  // pageable buffer (a host vector) is gone: smp captures none.
  if (pageable)
    if (cudaError_t e = refuseOnCapturedStream(
            stream, "cudaMemcpyAsync of pageable host memory on a captured "
                    "stream (the graph would read it at each launch, not "
                    "now)"))
      return e;
  countAsyncCopy();
  enqueueWork(
      stream, [=] { std::memmove(dst, src, count); },
      pageable ? WorkKind::Immediate : WorkKind::Normal);
  return cudaSuccess;
}

cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
  if (!inside(devPtr, count, MemoryKind::Device))
    return fail(cudaErrorInvalidValue,
                "cudaMemset of " + std::to_string(count) + " bytes at " +
                    hex(devPtr) + ": not inside a device allocation");
  if (cudaError_t e = refuseDuringCapture("cudaMemset"))
    return e;
  runLegacy(); // on the null stream: after the blocking streams' work
  std::memset(devPtr, value, count);
  return stickyError();
}

cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count,
                            cudaStream_t stream) {
  if (!inside(devPtr, count, MemoryKind::Device))
    return fail(cudaErrorInvalidValue,
                "cudaMemsetAsync of " + std::to_string(count) + " bytes at " +
                    hex(devPtr) + ": not inside a device allocation");
  enqueueWork(stream, [=] { std::memset(devPtr, value, count); });
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return takeLastError(); }
cudaError_t cudaPeekAtLastError(void) { return peekLastError(); }

cudaError_t cudaMemGetInfo(size_t *freeBytes, size_t *total) {
  *total = deviceMemory();
  // A pool keeps the memory it mapped: what it holds beyond its live
  // allocations (which deviceBytesInUse counts) is in use too.
  size_t used = deviceBytesInUse();
  {
    std::lock_guard<std::mutex> lock(poolMutex);
    for (EmuPool *pool : allPools())
      used += pool->reserved - pool->used;
  }
  *freeBytes = used < *total ? *total - used : 0;
  return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr,
                                 int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || static_cast<size_t>(value) > kSharedPerBlockOptin)
      return fail(cudaErrorInvalidValue,
                  "cudaFuncSetAttribute: " + std::to_string(value) +
                      " bytes of dynamic shared memory (at most " +
                      std::to_string(kSharedPerBlockOptin) + ")");
    setDynamicSharedLimit(func, static_cast<size_t>(value));
  }
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr,
                                   int device) {
  if (cudaError_t e = checkDevice(device); e != cudaSuccess)
    return e;
  switch (attr) {
  case cudaDevAttrMaxSharedMemoryPerBlockOptin:
    *value = static_cast<int>(kSharedPerBlockOptin);
    return cudaSuccess;
  case cudaDevAttrMaxSharedMemoryPerBlock:
    *value = static_cast<int>(kSharedPerBlock);
    return cudaSuccess;
  case cudaDevAttrMultiProcessorCount:
    *value = kMultiprocessors;
    return cudaSuccess;
  case cudaDevAttrMaxThreadsPerBlock:
    *value = 1024;
    return cudaSuccess;
  case cudaDevAttrWarpSize:
    *value = 32;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMajor:
    *value = computeCapability().first;
    return cudaSuccess;
  case cudaDevAttrComputeCapabilityMinor:
    *value = computeCapability().second;
    return cudaSuccess;
  default:
    return fail(cudaErrorInvalidValue,
                "cudaDeviceGetAttribute: attribute " +
                    std::to_string(static_cast<int>(attr)) +
                    " is not emulated (kernels/cudaemu/Runtime.cpp)");
  }
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  if (cudaError_t e = checkDevice(device); e != cudaSuccess)
    return e;
  std::memset(prop, 0, sizeof(*prop));
  std::snprintf(prop->name, sizeof prop->name, "smp CUDA emulator (H100 limits)");
  prop->totalGlobalMem = deviceMemory();
  prop->sharedMemPerBlock = kSharedPerBlock;
  prop->sharedMemPerBlockOptin = kSharedPerBlockOptin;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = computeCapability().first;
  prop->minor = computeCapability().second;
  prop->multiProcessorCount = kMultiprocessors;
  prop->l2CacheSize = 50 << 20;
  return cudaSuccess;
}

const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
#define SMP_EMU_NAME(e)                                                        \
  case e:                                                                      \
    return #e;
    SMP_EMU_NAME(cudaSuccess)
    SMP_EMU_NAME(cudaErrorInvalidValue)
    SMP_EMU_NAME(cudaErrorMemoryAllocation)
    SMP_EMU_NAME(cudaErrorInvalidConfiguration)
    SMP_EMU_NAME(cudaErrorInvalidDevice)
    SMP_EMU_NAME(cudaErrorInvalidMemcpyDirection)
    SMP_EMU_NAME(cudaErrorNoDevice)
    SMP_EMU_NAME(cudaErrorInvalidResourceHandle)
    SMP_EMU_NAME(cudaErrorNotReady)
    SMP_EMU_NAME(cudaErrorIllegalAddress)
    SMP_EMU_NAME(cudaErrorLaunchFailure)
    SMP_EMU_NAME(cudaErrorIllegalState)
    SMP_EMU_NAME(cudaErrorStreamCaptureUnsupported)
    SMP_EMU_NAME(cudaErrorStreamCaptureInvalidated)
    SMP_EMU_NAME(cudaErrorStreamCaptureMerge)
    SMP_EMU_NAME(cudaErrorStreamCaptureUnmatched)
    SMP_EMU_NAME(cudaErrorStreamCaptureUnjoined)
    SMP_EMU_NAME(cudaErrorStreamCaptureIsolation)
    SMP_EMU_NAME(cudaErrorStreamCaptureImplicit)
    SMP_EMU_NAME(cudaErrorCapturedEvent)
#undef SMP_EMU_NAME
  default:
    return "cudaErrorUnknown";
  }
}

const char *cudaGetErrorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidValue:
    return "invalid argument";
  case cudaErrorMemoryAllocation:
    return "out of memory";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidDevice:
    return "invalid device ordinal";
  case cudaErrorNoDevice:
    return "no CUDA-capable device is detected";
  case cudaErrorIllegalAddress:
    return "an illegal memory access was encountered";
  case cudaErrorLaunchFailure:
    return "unspecified launch failure";
  case cudaErrorStreamCaptureUnsupported:
    return "operation not permitted when stream is capturing";
  case cudaErrorStreamCaptureInvalidated:
    return "operation failed due to a previous error during capture";
  case cudaErrorStreamCaptureUnjoined:
    return "capturing stream has unjoined work";
  case cudaErrorStreamCaptureIsolation:
    return "dependency created on uncaptured work in another stream";
  case cudaErrorCapturedEvent:
    return "operation not permitted on an event last recorded in a "
           "capturing stream";
  default:
    return cudaGetErrorName(error);
  }
}

} // extern "C"
