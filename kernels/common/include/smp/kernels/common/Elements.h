//===- Elements.h - Element access for host and device code -----*- C++ -*-===//
//
// Inline functions the CPU kernels and the CUDA kernels (host or device
// code) share: no CUDA, no OpenMP needed to include this.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_COMMON_ELEMENTS_H
#define SMP_KERNELS_COMMON_ELEMENTS_H

#include "smp/base/DType.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define SMP_HOST_DEVICE __host__ __device__
#else
#define SMP_HOST_DEVICE
#endif

namespace smp::kernels::common {

/// Element i of an integer (or Bool) tensor at `p` as int64; u64 values
/// above INT64_MAX saturate. 0 for a float dtype.
SMP_HOST_DEVICE inline int64_t loadIndex(const void *p, smp::base::DType t,
                                         int64_t i) {
  using smp::base::DType;
  switch (t) {
  case DType::Bool:
  case DType::U8:
    return static_cast<const uint8_t *>(p)[i];
  case DType::I8:
    return static_cast<const int8_t *>(p)[i];
  case DType::I16:
    return static_cast<const int16_t *>(p)[i];
  case DType::U16:
    return static_cast<const uint16_t *>(p)[i];
  case DType::I32:
    return static_cast<const int32_t *>(p)[i];
  case DType::U32:
    return static_cast<const uint32_t *>(p)[i];
  case DType::I64:
    return static_cast<const int64_t *>(p)[i];
  case DType::U64: {
    uint64_t v = static_cast<const uint64_t *>(p)[i];
    return v > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
  }
  default:
    return 0;
  }
}

/// Float to integer as the cast kernels convert: truncates toward zero; NaN
/// gives 0; values beyond i64 (u64 for uint64_t) saturate, then narrower
/// types wrap.
template <class T> SMP_HOST_DEVICE T floatToInt(double v) {
#if defined(__CUDA_ARCH__)
  if (isnan(v))
    return T(0);
  v = trunc(v);
#else
  if (std::isnan(v))
    return T(0);
  v = std::trunc(v);
#endif
  if constexpr (std::is_same_v<T, uint64_t>) {
    if (v >= 9223372036854775808.0)
      return v >= 18446744073709551616.0 ? UINT64_MAX
                                         : static_cast<uint64_t>(v);
  }
  int64_t i;
  if (v >= 9223372036854775808.0)
    i = INT64_MAX;
  else if (v < -9223372036854775808.0)
    i = INT64_MIN;
  else
    i = static_cast<int64_t>(v);
  return static_cast<T>(i);
}

} // namespace smp::kernels::common

#endif // SMP_KERNELS_COMMON_ELEMENTS_H
