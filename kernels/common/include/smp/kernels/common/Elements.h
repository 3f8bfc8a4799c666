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

/// X(enumerator, C++ type) for each integer DType (not Bool), for the
/// switches over them: `#define CASE(D, T) case DType::D: ...`.
#define SMP_INTEGER_DTYPES(X)                                                  \
  X(I8, int8_t)                                                                \
  X(I16, int16_t)                                                              \
  X(I32, int32_t)                                                              \
  X(I64, int64_t)                                                              \
  X(U8, uint8_t)                                                               \
  X(U16, uint16_t)                                                             \
  X(U32, uint32_t)                                                             \
  X(U64, uint64_t)

namespace smp::kernels::common {

/// An integer as int64; u64 values above INT64_MAX saturate.
template <class T> SMP_HOST_DEVICE int64_t toIndex(T v) {
  if constexpr (std::is_same_v<T, uint64_t>)
    return v > uint64_t(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
  else
    return static_cast<int64_t>(v);
}

/// Element i of an integer (or Bool) tensor at `p` as int64 (toIndex). 0
/// for a float dtype.
SMP_HOST_DEVICE inline int64_t loadIndex(const void *p, smp::base::DType t,
                                         int64_t i) {
  using smp::base::DType;
  switch (t) {
  case DType::Bool:
    return static_cast<const uint8_t *>(p)[i];
#define SMP_LOAD_INDEX(D, T)                                                   \
  case DType::D:                                                               \
    return toIndex(static_cast<const T *>(p)[i]);
    SMP_INTEGER_DTYPES(SMP_LOAD_INDEX)
#undef SMP_LOAD_INDEX
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

/// Integer remainders, b != 0: C's % (the dividend's sign) or, with floor,
/// the floor remainder (the divisor's sign). INT_MIN % -1 is 0.
template <class T> SMP_HOST_DEVICE T intMod(T a, T b, bool floor) {
  if constexpr (std::is_signed_v<T>) {
    if (b == T(-1))
      return T(0);
    T r = static_cast<T>(a % b);
    if (floor && r != T(0) && ((r < T(0)) != (b < T(0))))
      r = static_cast<T>(r + b);
    return r;
  } else {
    return static_cast<T>(a % b);
  }
}

} // namespace smp::kernels::common

#endif // SMP_KERNELS_COMMON_ELEMENTS_H
