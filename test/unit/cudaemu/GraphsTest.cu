//===- GraphsTest.cu - Stream capture and CUDA graphs ---------------------===//
//
// CUDA source (it builds with nvcc too) run through kernels/cudaemu: a
// stream capture records its streams' work without running it, a graph's
// launches replay it, and what cudart refuses during a capture (a
// synchronization, a synchronous copy or allocation, a wait for uncaptured
// work, a stream left unjoined) fails the capture as on a GPU, so that
// smprun's captured step (Executor::setGraphs) is checked here before a
// GPU runs it.
//
//===----------------------------------------------------------------------===//

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "EmuTestUtil.h"

namespace {

using smp::emutest::deviceCopy;
using smp::emutest::hostCopy;

constexpr int kN = 64;

__global__ void addTo(float *p, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] += v;
}

void launchAdd(float *p, float v, cudaStream_t s) {
  addTo<<<(kN + 31) / 32, 32, 0, s>>>(p, v, kN);
}

std::vector<float> filled(float v) { return std::vector<float>(kN, v); }

cudaStream_t makeStream() {
  cudaStream_t s = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  return s;
}

cudaEvent_t makeEvent() {
  cudaEvent_t e = nullptr;
  EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  return e;
}

uint64_t graphMemory(cudaGraphMemAttributeType attr) {
  uint64_t v = ~uint64_t(0);
  EXPECT_EQ(cudaDeviceGetGraphMemAttribute(0, attr, &v), cudaSuccess);
  return v;
}

// Captured work does not run; each launch runs it again, with the
// arguments and addresses it was captured with, scratch memory included.
TEST(CudaEmuGraphs, ACaptureRunsNothingAndEachLaunchReplaysIt) {
  cudaStream_t s = makeStream();
  float *acc = deviceCopy(filled(0)), *out = deviceCopy(filled(0));
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
            cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  launchAdd(acc, 1.5f, s);
  float *scratch = nullptr;
  ASSERT_EQ(cudaMallocAsync(&scratch, kN * sizeof(float), s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(scratch, acc, kN * sizeof(float),
                            cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  launchAdd(scratch, 10.0f, s);
  ASSERT_EQ(cudaMemcpyAsync(out, scratch, kN * sizeof(float),
                            cudaMemcpyDeviceToDevice, s),
            cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(scratch, s), cudaSuccess);
  EXPECT_EQ(graphMemory(cudaGraphMemAttrUsedMemCurrent), kN * sizeof(float));
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusNone);
  EXPECT_EQ(hostCopy(acc, kN), filled(0)); // captured, not run
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess); // exec keeps the body
  for (int launch = 1; launch <= 3; ++launch) {
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(hostCopy(acc, kN), filled(1.5f * launch));
    EXPECT_EQ(hostCopy(out, kN), filled(1.5f * launch + 10.0f));
  }
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(graphMemory(cudaGraphMemAttrUsedMemCurrent), 0u);
  EXPECT_GE(graphMemory(cudaGraphMemAttrUsedMemHigh), kN * sizeof(float));
  cudaFree(acc);
  cudaFree(out);
  cudaStreamDestroy(s);
}

// A side stream joins through an event recorded in the capture; the
// capture ends only once the origin has waited for the side's last work.
TEST(CudaEmuGraphs, ASideStreamJoinsThroughAnEventAndMustBeJoinedBack) {
  cudaStream_t s = makeStream(), side = makeStream();
  cudaEvent_t fork = makeEvent(), join = makeEvent();
  float *a = deviceCopy(filled(0)), *b = deviceCopy(filled(0));
  for (bool joinBack : {false, true}) {
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
              cudaSuccess);
    launchAdd(a, 1.0f, s);
    ASSERT_EQ(cudaEventRecord(fork, s), cudaSuccess);
    ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusActive);
    ASSERT_EQ(cudaMemcpyAsync(b, a, kN * sizeof(float),
                              cudaMemcpyDeviceToDevice, side),
              cudaSuccess);
    launchAdd(b, 2.0f, side);
    if (joinBack) {
      ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
      ASSERT_EQ(cudaStreamWaitEvent(s, join, 0), cudaSuccess);
    }
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(s, &graph),
              joinBack ? cudaSuccess : cudaErrorStreamCaptureUnjoined);
    cudaGetLastError();
    ASSERT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusNone); // the capture is over
    if (!joinBack) {
      EXPECT_EQ(graph, nullptr);
      continue;
    }
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    EXPECT_EQ(hostCopy(a, kN), filled(1));
    EXPECT_EQ(hostCopy(b, kN), filled(3)); // the side's work, after a's add
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  // The events last recorded in the capture stand for no stream's work.
  EXPECT_EQ(cudaEventQuery(join), cudaErrorCapturedEvent);
  cudaGetLastError();
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(s);
  cudaStreamDestroy(side);
}

// A capture's allocation freed in it is taken again by a later one on the
// same stream (ordered after the free), not by one on another stream.
TEST(CudaEmuGraphs, AFreedAllocationIsReusedOnlyAfterItsFree) {
  cudaStream_t s = makeStream(), side = makeStream();
  cudaEvent_t fork = makeEvent(), join = makeEvent();
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
  void *first = nullptr, *again = nullptr, *sideOne = nullptr;
  ASSERT_EQ(cudaMallocAsync(&first, 1024, s), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(first, s), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&sideOne, 512, side), cudaSuccess);
  ASSERT_EQ(cudaMallocAsync(&again, 512, s), cudaSuccess);
  EXPECT_NE(sideOne, first);
  EXPECT_EQ(again, first);
  ASSERT_EQ(cudaFreeAsync(sideOne, side), cudaSuccess);
  ASSERT_EQ(cudaFreeAsync(again, s), cudaSuccess);
  EXPECT_EQ(graphMemory(cudaGraphMemAttrUsedMemCurrent), 1536u);
  ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(s, join, 0), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(graphMemory(cudaGraphMemAttrUsedMemCurrent), 0u);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(s);
  cudaStreamDestroy(side);
}

/// Begins a capture on `s`, makes `refused` (which must fail with `want`),
/// and checks that the capture's end fails and leaves no graph.
template <class Call>
void expectInvalidated(cudaStream_t s, cudaError_t want, Call refused) {
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal),
            cudaSuccess);
  EXPECT_EQ(refused(), want);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ASSERT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(1);
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  cudaGetLastError();
}

// What waits for the device, or allocates or copies synchronously, fails
// the capture; so does a wait for work outside it.
TEST(CudaEmuGraphs, WhatCudartRefusesDuringACaptureFailsIt) {
  cudaStream_t s = makeStream(), other = makeStream();
  float *a = deviceCopy(filled(0));
  std::vector<float> host = filled(1);
  expectInvalidated(s, cudaErrorStreamCaptureUnsupported,
                    [&] { return cudaStreamSynchronize(s); });
  expectInvalidated(s, cudaErrorStreamCaptureUnsupported,
                    [&] { return cudaDeviceSynchronize(); });
  expectInvalidated(s, cudaErrorStreamCaptureUnsupported, [&] {
    return cudaMemcpy(a, host.data(), kN * sizeof(float),
                      cudaMemcpyHostToDevice);
  });
  expectInvalidated(s, cudaErrorStreamCaptureUnsupported, [&] {
    void *p = nullptr;
    return cudaMalloc(&p, 256);
  });
  cudaEvent_t outside = makeEvent();
  launchAdd(a, 1.0f, other);
  ASSERT_EQ(cudaEventRecord(outside, other), cudaSuccess);
  expectInvalidated(s, cudaErrorStreamCaptureIsolation,
                    [&] { return cudaStreamWaitEvent(s, outside, 0); });
  // A stream that joined the capture and is destroyed before the end.
  cudaStream_t gone = makeStream();
  cudaEvent_t fork = makeEvent();
  expectInvalidated(s, cudaSuccess, [&] {
    EXPECT_EQ(cudaEventRecord(fork, s), cudaSuccess);
    EXPECT_EQ(cudaStreamWaitEvent(gone, fork, 0), cudaSuccess);
    return cudaStreamDestroy(gone);
  });
  cudaEventDestroy(fork);
  // None of it ran anything of the captures.
  EXPECT_EQ(hostCopy(a, kN), filled(1));
  // The legacy null stream cannot be captured.
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal),
            cudaErrorStreamCaptureUnsupported);
  cudaEventDestroy(outside);
  cudaFree(a);
  cudaStreamDestroy(s);
  cudaStreamDestroy(other);
}

} // namespace
