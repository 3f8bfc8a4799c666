//===- NcclReduce.cpp - The emulated NCCL's reduction arithmetic ----------===//
//
// How the emulated collectives (Nccl.cpp) combine two ranks' parts, and
// ncclAvg's division: f16/bf16 in f32, rounded once a contribution (as a
// ring's steps are).
//
//===----------------------------------------------------------------------===//

#include "NcclReduce.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace smp::cudaemu {

/// a = a (op) b elementwise over n elements of type t (avg sums here).
void combine(void *a, const void *b, size_t n, ncclDataType_t t, int op) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T *x = static_cast<T *>(a);
    const T *y = static_cast<const T *>(b);
    for (size_t i = 0; i < n; ++i) {
      switch (op) {
      case ncclProd:
        x[i] = x[i] * y[i];
        break;
      case ncclMax:
        x[i] = y[i] > x[i] ? y[i] : x[i];
        break;
      case ncclMin:
        x[i] = y[i] < x[i] ? y[i] : x[i];
        break;
      default: // sum, avg
        x[i] = x[i] + y[i];
      }
    }
  };
  switch (t) {
  case ncclInt8:
    return run(int8_t());
  case ncclUint8:
    return run(uint8_t());
  case ncclInt32:
    return run(int32_t());
  case ncclUint32:
    return run(uint32_t());
  case ncclInt64:
    return run(int64_t());
  case ncclUint64:
    return run(uint64_t());
  case ncclFloat32:
    return run(float());
  case ncclFloat64:
    return run(double());
  default:
    break;
  }
  // f16/bf16: in f32, rounded once per rank's contribution (as a ring).
  for (size_t i = 0; i < n; ++i) {
    float x, y;
    if (t == ncclFloat16) {
      x = __half2float(static_cast<const __half *>(a)[i]);
      y = __half2float(static_cast<const __half *>(b)[i]);
    } else {
      x = __bfloat162float(static_cast<const __nv_bfloat16 *>(a)[i]);
      y = __bfloat162float(static_cast<const __nv_bfloat16 *>(b)[i]);
    }
    float r = op == ncclProd  ? x * y
              : op == ncclMax ? (y > x ? y : x)
              : op == ncclMin ? (y < x ? y : x)
                              : x + y;
    if (t == ncclFloat16)
      static_cast<__half *>(a)[i] = __float2half_rn(r);
    else
      static_cast<__nv_bfloat16 *>(a)[i] = __float2bfloat16_rn(r);
  }
}

/// Divides n elements by `ranks` (ncclAvg).
void average(void *a, size_t n, ncclDataType_t t, int ranks) {
  for (size_t i = 0; i < n; ++i) {
    switch (t) {
    case ncclFloat32:
      static_cast<float *>(a)[i] /= ranks;
      break;
    case ncclFloat64:
      static_cast<double *>(a)[i] /= ranks;
      break;
    case ncclFloat16: {
      __half &h = static_cast<__half *>(a)[i];
      h = __float2half_rn(__half2float(h) / ranks);
      break;
    }
    case ncclBfloat16: {
      __nv_bfloat16 &h = static_cast<__nv_bfloat16 *>(a)[i];
      h = __float2bfloat16_rn(__bfloat162float(h) / ranks);
      break;
    }
    default: // integers: NCCL divides them too
      switch (t) {
      case ncclInt8:
      case ncclUint8:
        static_cast<int8_t *>(a)[i] /= ranks;
        break;
      case ncclInt32:
      case ncclUint32:
        static_cast<int32_t *>(a)[i] /= ranks;
        break;
      default:
        static_cast<int64_t *>(a)[i] /= ranks;
      }
    }
  }
}

} // namespace smp::cudaemu
