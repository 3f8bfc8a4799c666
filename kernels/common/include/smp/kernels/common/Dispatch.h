//===- Dispatch.h - Element-type dispatch of the kernels --------*- C++ -*-===//
//
// visitFloat / visitInt / visitBytes call a generic functor with Tag<T> for
// the C++ type of a dtype (the fp16/bf16 storage types are the caller's).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_COMMON_DISPATCH_H
#define SMP_KERNELS_COMMON_DISPATCH_H

#include "smp/kernels/common/Checks.h"
#include "smp/kernels/common/Elements.h"

namespace smp::kernels::common {

template <class T> struct Tag { using type = T; };

/// Calls f(Tag<S>{}) for the float storage type of t: float, double, or the
/// caller's storage types F16 and BF16 of the half types.
template <class F16, class BF16, class F>
Status visitFloat(DType t, const char *op, F &&f) {
  switch (t) {
  case DType::F32:
    return f(Tag<float>{});
  case DType::F64:
    return f(Tag<double>{});
  case DType::F16:
    return f(Tag<F16>{});
  case DType::BF16:
    return f(Tag<BF16>{});
  default:
    return unsupported(op, t);
  }
}

/// Calls f(Tag<T>{}) for the integer type of t (not Bool).
template <class F> Status visitInt(DType t, const char *op, F &&f) {
  switch (t) {
#define SMP_VISIT_INT(D, T)                                                    \
  case DType::D:                                                               \
    return f(Tag<T>{});
    SMP_INTEGER_DTYPES(SMP_VISIT_INT)
#undef SMP_VISIT_INT
  default:
    return unsupported(op, t);
  }
}

/// Calls f(Tag<T>{}) with an unsigned type of t's byte size (data movement).
template <class F> Status visitBytes(DType t, const char *op, F &&f) {
  switch (smp::base::dtypeSize(t)) {
  case 1:
    return f(Tag<uint8_t>{});
  case 2:
    return f(Tag<uint16_t>{});
  case 4:
    return f(Tag<uint32_t>{});
  case 8:
    return f(Tag<uint64_t>{});
  default:
    return unsupported(op, t);
  }
}

} // namespace smp::kernels::common

#endif // SMP_KERNELS_COMMON_DISPATCH_H
