//===- RuntimeApiTest.cu - The emulator's cudart bookkeeping ------------===//
//
// CUDA source (it builds with nvcc too) run through kernels/cudaemu: what
// the emulated runtime keeps for smp's instruments, as cudart keeps it:
// events' times (the profile's device clock) and memory pools' accounting
// (smprun's device memory by holder).
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <unistd.h>

#include <cstdint>

namespace {

// Work runs when it is queued (without SMP_CUDAEMU_DEFER), so an event's
// time is the host's when it was recorded: elapsed time covers what ran
// between the records. An event
// never recorded or made without timing is refused, as cudart refuses it.
TEST(CudaEmu, EventsTimeWhatRanBetweenTheirRecords) {
  cudaEvent_t a, b, never, untimed;
  ASSERT_EQ(cudaEventCreate(&a), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&b), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&never), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(a, 0), cudaSuccess);
  usleep(20000);
  ASSERT_EQ(cudaEventRecord(b, 0), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, 0), cudaSuccess);
  float ms = -1;
  ASSERT_EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
  EXPECT_GE(ms, 19.0f);
  EXPECT_LT(ms, 2000.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, a, never),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(&ms, untimed, b),
            cudaErrorInvalidResourceHandle);
  cudaGetLastError();
  for (cudaEvent_t e : {a, b, never, untimed})
    cudaEventDestroy(e);
}

// A pool's attributes count its stream-ordered allocations: the bytes in
// use now and at most, and the bytes it maps, which it keeps (smp's pools
// are told to keep them) and cudaMemGetInfo counts as in use. Setting a
// high-water attribute to 0 starts it again from the current value; any
// other value is refused, as cudart refuses it.
TEST(CudaEmu, PoolsCountTheirAllocationsAndKeepWhatTheyMapped) {
  auto attr = [](cudaMemPool_t pool, cudaMemPoolAttr a) {
    uint64_t v = ~uint64_t(0);
    EXPECT_EQ(cudaMemPoolGetAttribute(pool, a, &v), cudaSuccess);
    return v;
  };
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool;
  ASSERT_EQ(cudaMemPoolCreate(&pool, &props), cudaSuccess);
  size_t free0 = 0, free1 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  void *a, *b;
  ASSERT_EQ(cudaMallocFromPoolAsync(&a, 1000, pool, 0), cudaSuccess);
  ASSERT_EQ(cudaMallocFromPoolAsync(&b, 500, pool, 0), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(a, 0), cudaSuccess);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemCurrent), 500u);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemHigh), 1500u);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrReservedMemCurrent), 1500u);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrReservedMemHigh), 1500u);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free0 - free1, 1500u); // b and the 1000 bytes the pool keeps
  uint64_t zero = 0, one = 1;
  ASSERT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero),
            cudaSuccess);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemHigh), 500u);
  EXPECT_EQ(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &one),
            cudaErrorInvalidValue);
  cudaGetLastError();
  ASSERT_EQ(cudaFreeAsync(b, 0), cudaSuccess);
  EXPECT_EQ(attr(pool, cudaMemPoolAttrUsedMemCurrent), 0u);
  ASSERT_EQ(cudaMemPoolDestroy(pool), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
  EXPECT_EQ(free1, free0);

  // cudaMallocAsync takes the current device's default pool.
  cudaMemPool_t dflt;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&dflt, 0), cudaSuccess);
  ASSERT_EQ(cudaMemPoolSetAttribute(dflt, cudaMemPoolAttrUsedMemHigh, &zero),
            cudaSuccess);
  uint64_t before = attr(dflt, cudaMemPoolAttrUsedMemCurrent);
  ASSERT_EQ(cudaMallocAsync(&a, 4096, 0), cudaSuccess);
  EXPECT_EQ(attr(dflt, cudaMemPoolAttrUsedMemCurrent), before + 4096);
  ASSERT_EQ(cudaFreeAsync(a, 0), cudaSuccess);
  EXPECT_EQ(attr(dflt, cudaMemPoolAttrUsedMemHigh), before + 4096);
}

} // namespace
