//===- EmuTestUtil.h - Helpers of the CUDA emulator's tests ------*- C++
//-*-===//
//
// Copies between host vectors and device memory, and the summation order
// the run asked the emulator for (SMP_CUDAEMU_SUM_ORDER), for the tests in
// this folder (CUDA sources that build with nvcc too).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TEST_CUDAEMU_EMUTESTUTIL_H
#define SMP_TEST_CUDAEMU_EMUTESTUTIL_H

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace smp::emutest {

template <class T> T *deviceCopy(const std::vector<T> &h) {
  T *d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, h.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(
      cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice),
      cudaSuccess);
  return d;
}

template <class T> std::vector<T> hostCopy(const T *d, size_t n) {
  std::vector<T> h(n);
  EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return h;
}

/// Whether the run asked for the other summation order
/// (SMP_CUDAEMU_SUM_ORDER=reverse).
inline bool reverseSums() {
  const char *order = std::getenv("SMP_CUDAEMU_SUM_ORDER");
  return order && std::string(order) == "reverse";
}

} // namespace smp::emutest

#endif // SMP_TEST_CUDAEMU_EMUTESTUTIL_H
