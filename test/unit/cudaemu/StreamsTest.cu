//===- StreamsTest.cu - Stream priorities and deferred streams ------------===//
//
// CUDA source (it builds with nvcc too) run through kernels/cudaemu: the
// emulated streams' priorities (an H100's range), and SMP_CUDAEMU_DEFER,
// which makes the streams of one priority slow (their work queued until
// something needs it) so that a missing cudaStreamWaitEvent between two
// streams reads stale data: kernels, copies, frees, cuBLASLt products and
// NCCL operations queued in order, and run by the synchronizations, queries
// and waits that need them. Each test sets the variable before it makes
// its streams and unsets it at its end.
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "EmuTestUtil.h"

namespace {

using smp::emutest::deviceCopy;
using smp::emutest::hostCopy;

constexpr int kN = 64;

__global__ void fill(float *p, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = v;
}

/// A launch failure on a GPU (threads of one block at different barriers).
__global__ void barrierOrShuffle(float *out) {
  float v = threadIdx.x;
  if (threadIdx.x < 16)
    __syncthreads();
  else
    v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

void launchFill(float *p, float v, cudaStream_t s) {
  fill<<<(kN + 31) / 32, 32, 0, s>>>(p, v, kN);
}

std::vector<float> filled(float v) { return std::vector<float>(kN, v); }

/// Sets SMP_CUDAEMU_DEFER (when `mode` is not null) for one test; at its
/// end every queued piece of work runs and the variable is unset.
class CudaEmuStreams : public ::testing::Test {
protected:
  void defer(const char *mode) { setenv("SMP_CUDAEMU_DEFER", mode, 1); }
  void TearDown() override {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    unsetenv("SMP_CUDAEMU_DEFER");
  }
};

TEST_F(CudaEmuStreams, PrioritiesAreAnH100s) {
  int least = 1, greatest = 1;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  EXPECT_EQ(least, 0);
  EXPECT_EQ(greatest, -5);
  cudaStream_t plain, flagged, high, tooHigh, tooLow;
  ASSERT_EQ(cudaStreamCreate(&plain), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&flagged, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, -3),
            cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&tooHigh, 0, -40), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&tooLow, 0, 7), cudaSuccess);
  auto priority = [](cudaStream_t s) {
    int p = 99;
    EXPECT_EQ(cudaStreamGetPriority(s, &p), cudaSuccess);
    return p;
  };
  EXPECT_EQ(priority(nullptr), 0);
  EXPECT_EQ(priority(plain), 0);
  EXPECT_EQ(priority(flagged), 0);
  EXPECT_EQ(priority(high), -3);
  EXPECT_EQ(priority(tooHigh), -5); // clamped into the range, as cudart
  EXPECT_EQ(priority(tooLow), 0);
  for (cudaStream_t s : {plain, flagged, high, tooHigh, tooLow})
    EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

/// A kernel on `slow` writes src (1s before, 2s after); `fast` copies it to
/// dst, after waiting for an event recorded behind the kernel when `wait`.
/// What dst holds once both streams are done.
std::vector<float> copyAcross(cudaStream_t slow, cudaStream_t fast, bool wait) {
  float *src = deviceCopy(filled(1)), *dst = deviceCopy(filled(0));
  cudaEvent_t written;
  EXPECT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming),
            cudaSuccess);
  launchFill(src, 2, slow);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(written, slow), cudaSuccess);
  if (wait)
    EXPECT_EQ(cudaStreamWaitEvent(fast, written, 0), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(dst, src, kN * sizeof(float),
                            cudaMemcpyDeviceToDevice, fast),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(fast), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(slow), cudaSuccess);
  EXPECT_EQ(hostCopy(src, kN), filled(2)); // the kernel ran in the end
  std::vector<float> out = hostCopy(dst, kN);
  cudaEventDestroy(written);
  cudaFree(src);
  cudaFree(dst);
  return out;
}

// low: the default-priority stream is slow. A high-priority stream that
// waits for its kernel copies the new values; one that does not copies
// the old ones: the missing wait shows.
TEST_F(CudaEmuStreams, LowDefersTheDefaultPriorityAndShowsAMissingWait) {
  defer("low");
  cudaStream_t slow, fast;
  ASSERT_EQ(cudaStreamCreate(&slow), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithPriority(&fast, cudaStreamDefault, -5),
            cudaSuccess);
  EXPECT_EQ(copyAcross(slow, fast, true), filled(2));
  EXPECT_EQ(copyAcross(slow, fast, false), filled(1));
  cudaStreamDestroy(slow);
  cudaStreamDestroy(fast);
}

// high: the mirror image, the high-priority stream slow.
TEST_F(CudaEmuStreams, HighDefersTheHigherPrioritiesAndShowsAMissingWait) {
  defer("high");
  cudaStream_t slow, fast;
  ASSERT_EQ(cudaStreamCreateWithPriority(&slow, cudaStreamNonBlocking, -1),
            cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&fast), cudaSuccess);
  EXPECT_EQ(copyAcross(slow, fast, true), filled(2));
  EXPECT_EQ(copyAcross(slow, fast, false), filled(1));
  cudaStreamDestroy(slow);
  cudaStreamDestroy(fast);
}

// A wait is for the event's record as it stood when cudaStreamWaitEvent
// was called: recording the event again behind later work does not make
// the waiting stream wait for that work. (Both streams are slow, so the
// wait runs only when the second stream is synchronized.)
TEST_F(CudaEmuStreams, AWaitIsForTheRecordItWasCalledAfter) {
  defer("low");
  cudaStream_t a, b;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  float *src = deviceCopy(filled(1)), *dst = deviceCopy(filled(0));
  cudaEvent_t e;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  launchFill(src, 2, a);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
  launchFill(src, 3, a);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess); // re-recorded
  ASSERT_EQ(cudaMemcpyAsync(dst, src, kN * sizeof(float),
                            cudaMemcpyDeviceToDevice, b),
            cudaSuccess);
  EXPECT_EQ(hostCopy(dst, kN), filled(0)); // b is slow (and non-blocking)
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(hostCopy(dst, kN), filled(2));
  EXPECT_EQ(hostCopy(src, kN), filled(2)); // a's second kernel still queued
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(hostCopy(src, kN), filled(3));
  cudaEventDestroy(e);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  cudaFree(src);
  cudaFree(dst);
}

// What runs a slow stream's queue: a query of it (which then answers
// done), a query or synchronization of an event recorded on it, its
// synchronization, the device's, and its destruction. An event's time is
// taken when its record runs: not ready before.
TEST_F(CudaEmuStreams, SynchronizationsAndQueriesRunTheQueue) {
  defer("low");
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float *d = deviceCopy(filled(1));
  cudaEvent_t e, start;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, s), cudaSuccess);
  launchFill(d, 2, s);
  EXPECT_EQ(hostCopy(d, kN), filled(1)); // queued
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(hostCopy(d, kN), filled(2));
  launchFill(d, 3, s);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  launchFill(d, 4, s);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, e), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  EXPECT_EQ(hostCopy(d, kN), filled(3)); // up to the event only
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, e), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  launchFill(d, 5, s);
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  EXPECT_EQ(hostCopy(d, kN), filled(4));
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(hostCopy(d, kN), filled(5));
  launchFill(d, 6, s);
  EXPECT_EQ(hostCopy(d, kN), filled(5));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(hostCopy(d, kN), filled(6));
  launchFill(d, 7, s);
  ASSERT_EQ(cudaMemsetAsync(d, 0, sizeof(float), s), cudaSuccess);
  EXPECT_EQ(hostCopy(d, kN), filled(6));
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  std::vector<float> want = filled(7);
  want[0] = 0;
  EXPECT_EQ(hostCopy(d, kN), want);
  cudaEventDestroy(e);
  cudaEventDestroy(start);
  cudaFree(d);
}

// The null stream is slow under low too; a synchronous copy runs it (and
// every blocking stream) first, and work on a blocking stream runs after
// the null stream's.
TEST_F(CudaEmuStreams, TheLegacyNullStreamOrdersTheBlockingStreams) {
  defer("low");
  float *d = deviceCopy(filled(1)), *dst = deviceCopy(filled(0));
  launchFill(d, 2, nullptr);
  cudaStream_t fastBlocking, fastNonBlocking;
  ASSERT_EQ(
      cudaStreamCreateWithPriority(&fastNonBlocking, cudaStreamNonBlocking, -5),
      cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dst, d, kN * sizeof(float),
                            cudaMemcpyDeviceToDevice, fastNonBlocking),
            cudaSuccess);
  EXPECT_EQ(hostCopy(dst, kN), filled(1)); // no order with the null stream
  ASSERT_EQ(cudaStreamCreateWithPriority(&fastBlocking, 0, -5), cudaSuccess);
  launchFill(d, 3, nullptr);
  ASSERT_EQ(cudaMemcpyAsync(dst, d, kN * sizeof(float),
                            cudaMemcpyDeviceToDevice, fastBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(fastBlocking), cudaSuccess);
  EXPECT_EQ(hostCopy(dst, kN), filled(3));
  cudaStreamDestroy(fastBlocking);
  cudaStreamDestroy(fastNonBlocking);
  cudaFree(d);
  cudaFree(dst);
}

// cudaFreeAsync frees when the stream's work reaches it (the pool's count
// of the bytes in use drops then); cudaMallocAsync allocates when called.
TEST_F(CudaEmuStreams, FreeAsyncIsDeferred) {
  defer("low");
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaMemPool_t pool;
  ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, 0), cudaSuccess);
  auto used = [&] {
    uint64_t v = 0;
    EXPECT_EQ(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &v),
              cudaSuccess);
    return v;
  };
  uint64_t before = used();
  float *p = nullptr;
  ASSERT_EQ(cudaMallocAsync(reinterpret_cast<void **>(&p), 1000, s),
            cudaSuccess);
  EXPECT_EQ(used(), before + 1000);
  launchFill(p, 2, s); // 64 floats of the 250
  ASSERT_EQ(cudaFreeAsync(p, s), cudaSuccess);
  EXPECT_EQ(used(), before + 1000); // queued behind the kernel
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(used(), before);
  EXPECT_EQ(cudaFreeAsync(p, s), cudaErrorInvalidValue); // gone: refused
  cudaGetLastError();
  cudaStreamDestroy(s);
}

// Unset (or empty): every stream runs its work when it is issued, so a
// missing wait cannot show.
TEST_F(CudaEmuStreams, UnsetRunsWorkWhenIssued) {
  for (const char *mode : {"", static_cast<const char *>(nullptr)}) {
    if (mode)
      defer(mode);
    else
      unsetenv("SMP_CUDAEMU_DEFER");
    cudaStream_t plain, high;
    ASSERT_EQ(cudaStreamCreateWithFlags(&plain, cudaStreamNonBlocking),
              cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, -5),
              cudaSuccess);
    EXPECT_EQ(copyAcross(plain, high, false), filled(2));
    EXPECT_EQ(copyAcross(high, plain, false), filled(2));
    float *d = deviceCopy(filled(1));
    launchFill(d, 2, nullptr);
    launchFill(d, 3, plain);
    EXPECT_EQ(hostCopy(d, kN), filled(3));
    cudaFree(d);
    cudaStreamDestroy(plain);
    cudaStreamDestroy(high);
  }
}

// A fault in a deferred kernel shows at the synchronization that runs it
// (sticky, so in a child process).
TEST(CudaEmuStreamsDeathTest, AFaultOfDeferredWorkIsStickyAtTheSync) {
  EXPECT_EXIT(
      {
        setenv("SMP_CUDAEMU_DEFER", "low", 1);
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        float *d;
        cudaMalloc(&d, 32 * sizeof(float));
        barrierOrShuffle<<<1, 32, 0, s>>>(d);
        bool issued = cudaGetLastError() == cudaSuccess;
        std::exit(issued && cudaStreamSynchronize(s) == cudaErrorLaunchFailure
                      ? 0
                      : 1);
      },
      testing::ExitedWithCode(0), "a GPU would hang");
}

TEST(CudaEmuStreamsDeathTest, RefusesAnUnknownSetting) {
  EXPECT_DEATH(
      {
        setenv("SMP_CUDAEMU_DEFER", "slow", 1);
        cudaStream_t s;
        cudaStreamCreate(&s);
      },
      "SMP_CUDAEMU_DEFER=slow is not a setting: low .*high .*unset");
}

/// One-column product D (2 x 1) = A (2 x 2) B (2 x 1), f32, column-major.
struct Product {
  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t heur{};
  Product() {
    cublasLtCreate(&h);
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&a, CUDA_R_32F, 2, 2, 2);
    cublasLtMatrixLayoutCreate(&b, CUDA_R_32F, 2, 1, 2);
    cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, 2, 1, 2);
    cublasLtMatmulPreferenceCreate(&pref);
    int found = 0;
    EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(h, op, a, b, d, d, pref, 1, &heur,
                                             &found),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(found, 1);
  }
  ~Product() {
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(a);
    cublasLtMatrixLayoutDestroy(b);
    cublasLtMatrixLayoutDestroy(d);
    cublasLtMatmulDescDestroy(op);
    cublasLtDestroy(h);
  }
};

// A product on a slow stream runs in the stream's order (after the kernel
// that writes its operand), with alpha and beta as they were when it was
// called.
TEST_F(CudaEmuStreams, CublasLtProductsAreDeferredInOrder) {
  defer("low");
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float *A = deviceCopy(filled(1)), *B = deviceCopy(std::vector<float>{1, 2});
  float *D = deviceCopy(std::vector<float>{-1, -1});
  {
    Product p;
    launchFill(A, 2, s); // A = all 2s
    float alpha = 1, beta = 0;
    ASSERT_EQ(cublasLtMatmul(p.h, p.op, &alpha, A, p.a, B, p.b, &beta, D, p.d,
                             D, p.d, &p.heur.algo, nullptr, 0, s),
              CUBLAS_STATUS_SUCCESS);
    alpha = 100; // read when called
  }
  EXPECT_EQ(hostCopy(D, 2), (std::vector<float>{-1, -1}));
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(hostCopy(D, 2), (std::vector<float>{6, 6}));
  cudaStreamDestroy(s);
  for (float *x : {A, B, D})
    cudaFree(x);
}

// An NCCL all-reduce on a one-rank communicator (a copy) on a slow stream
// runs in the stream's order, when the stream is synchronized; destroying
// the communicator runs its queued operations first.
TEST_F(CudaEmuStreams, NcclOperationsAreDeferredInOrder) {
  defer("low");
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  float *x = deviceCopy(filled(1)), *y = deviceCopy(filled(0));
  launchFill(x, 2, s);
  ASSERT_EQ(ncclAllReduce(x, y, kN, ncclFloat32, ncclSum, comm, s),
            ncclSuccess);
  EXPECT_EQ(hostCopy(y, kN), filled(0));
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(hostCopy(y, kN), filled(2));
  launchFill(x, 3, s);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(x, y, kN, ncclFloat32, ncclSum, comm, s),
            ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(hostCopy(y, kN), filled(2));
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(hostCopy(y, kN), filled(3));
  cudaStreamDestroy(s);
  cudaFree(x);
  cudaFree(y);
}

} // namespace
