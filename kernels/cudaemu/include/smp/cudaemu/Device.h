//===- Device.h - CUDA device code as host C++ (the emulator) ----*- C++ -*-===//
//
// Force-included (-include) into each kernels/cuda source after
// kernels/cudaemu/translate.py rewrote its launches: the CUDA built-ins a
// kernel uses (threadIdx and friends, __syncthreads, warp shuffles,
// atomics, shared memory) on top of Launch.h's block scheduler, where every
// CUDA thread of a block is a fiber. Blocks run one after another, so a
// `__shared__` variable is a function-local static: one per kernel
// instantiation, shared by the threads of the block that runs. See
// docs/cuda-emulator.md.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_CUDAEMU_DEVICE_H
#define SMP_CUDAEMU_DEVICE_H

/// kernels/cuda's sources test it where host C++ needs another form.
#define SMP_CUDAEMU 1

// CUDA's headers leave these alone when they are defined (crt/host_defines.h).
#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "smp/cudaemu/Launch.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

using std::isinf;
using std::isnan;

#undef threadIdx
#undef blockIdx
#undef blockDim
#undef gridDim
#define threadIdx (::smp::cudaemu::self().threadIdx)
#define blockIdx (::smp::cudaemu::self().blockIdx)
#define blockDim (::smp::cudaemu::self().blockDim)
#define gridDim (::smp::cudaemu::self().gridDim)

inline void __syncthreads() { ::smp::cudaemu::syncthreads(); }
inline int __syncthreads_or(int predicate) {
  return ::smp::cudaemu::syncthreadsOr(predicate);
}
inline void __syncwarp(unsigned mask = 0xffffffffu) {
  ::smp::cudaemu::syncwarp(mask);
}

namespace smp::cudaemu {
/// One warp shuffle: lane `src` of this warp's value (width: the segment
/// size, as CUDA's), or the caller's own when src is outside its segment.
template <class T> T shuffle(unsigned mask, T v, int src, int width) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                "the emulator shuffles values of up to 8 bytes");
  uint64_t in = 0, out = 0;
  std::memcpy(&in, &v, sizeof(T));
  out = shuffleBits(mask, in, src, width);
  T r;
  std::memcpy(&r, &out, sizeof(T));
  return r;
}
} // namespace smp::cudaemu

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  int lane = ::smp::cudaemu::laneId();
  int base = lane & ~(width - 1);
  return ::smp::cudaemu::shuffle(mask, v, base + (src % width), width);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  int lane = ::smp::cudaemu::laneId();
  int seg = lane & (width - 1);
  int src = seg + static_cast<int>(delta) < width ? lane + delta : lane;
  return ::smp::cudaemu::shuffle(mask, v, src, width);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  int lane = ::smp::cudaemu::laneId();
  int seg = lane & (width - 1);
  int src = seg >= static_cast<int>(delta) ? lane - static_cast<int>(delta)
                                           : lane;
  return ::smp::cudaemu::shuffle(mask, v, src, width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int laneMask, int width = 32) {
  int lane = ::smp::cudaemu::laneId();
  int src = lane ^ laneMask;
  if ((src & ~(width - 1)) != (lane & ~(width - 1)))
    src = lane;
  return ::smp::cudaemu::shuffle(mask, v, src, width);
}

/// Bit l set for each lane l of `mask` whose predicate is true (an OR over
/// the warp by five exchanges; every lane of the warp takes part, as in the
/// kernels that use it).
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  unsigned bits = predicate ? 1u << ::smp::cudaemu::laneId() : 0u;
  for (int step = 16; step > 0; step /= 2)
    bits |= __shfl_xor_sync(0xffffffffu, bits, step);
  return bits & mask;
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }

// Atomics: the threads of a launch are fibers of one host thread, and
// launches run one at a time, so a plain read-modify-write is atomic.
template <class T> T atomicAdd(T *address, T v) {
  T old = *address;
  *address = old + v;
  return old;
}
template <class T> T atomicCAS(T *address, T compare, T v) {
  T old = *address;
  if (old == compare)
    *address = v;
  return old;
}
template <class T> T atomicExch(T *address, T v) {
  T old = *address;
  *address = v;
  return old;
}
template <class T> T atomicMax(T *address, T v) {
  T old = *address;
  if (v > old)
    *address = v;
  return old;
}
template <class T> T atomicMin(T *address, T v) {
  T old = *address;
  if (v < old)
    *address = v;
  return old;
}

// CUDA's min and max of two numbers (math_functions.hpp's overloads).
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> &&
                                   std::is_arithmetic_v<B>>>
std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(b) < static_cast<C>(a) ? static_cast<C>(b)
                                               : static_cast<C>(a);
}
template <class A, class B,
          class = std::enable_if_t<std::is_arithmetic_v<A> &&
                                   std::is_arithmetic_v<B>>>
std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return static_cast<C>(a) < static_cast<C>(b) ? static_cast<C>(b)
                                               : static_cast<C>(a);
}

/// cuda_runtime.h's typed form (nvcc only there).
template <class T>
cudaError_t cudaFuncSetAttribute(T *entry, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void *>(entry), attr,
                                value);
}

inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
template <class T> T __ldg(const T *p) { return *p; }

#endif // SMP_CUDAEMU_DEVICE_H
