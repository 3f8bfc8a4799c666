//===- Cast.cpp - Element type conversion between any two dtypes ----------===//
//
// Every source element is widened to double (floats), int64 (signed ints,
// Bool) or uint64 (unsigned ints), then narrowed to the target type.
//
//===----------------------------------------------------------------------===//

#include "Common.h"
#include "smp/kernels/common/Elements.h"

namespace smp::kernels::cpu {
using namespace detail;

namespace {

struct Bool8 {
  uint8_t v;
};

template <class F> Status visitAny(DType t, F &&f) {
  if (t == DType::Bool)
    return f(Tag<Bool8>{});
  if (smp::base::isFloat(t))
    return visitFloat(t, "cast", f);
  return visitInt(t, "cast", f);
}

template <class S> auto widen(S v) {
  if constexpr (std::is_same_v<S, Bool8>)
    return static_cast<int64_t>(v.v != 0);
  else if constexpr (std::is_integral_v<S> && std::is_signed_v<S>)
    return static_cast<int64_t>(v);
  else if constexpr (std::is_integral_v<S>)
    return static_cast<uint64_t>(v);
  else
    return static_cast<double>(Float<S>::load(v));
}

using common::floatToInt; // smp/kernels/common/Elements.h

template <class T, class V> T narrow(V v) {
  if constexpr (std::is_same_v<T, Bool8>) {
    return Bool8{static_cast<uint8_t>(v != V(0))};
  } else if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_floating_point_v<V>)
      return floatToInt<T>(v);
    else
      return static_cast<T>(v);
  } else {
    using C = typename Float<T>::C;
    return Float<T>::store(static_cast<C>(v));
  }
}

template <class S, class T> void castLoop(const S *x, T *y, int64_t n) {
  parallelFor(n, grainFor(2), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = narrow<T>(widen(x[i]));
  });
}

} // namespace

Status cast(const TensorRef &in, const TensorRef &out) {
  SMP_RETURN_IF_ERROR(common::checkCast(in, out));
  if (in.dtype == out.dtype)
    return copy(in, out);
  return visitAny(in.dtype, [&](auto from) {
    using S = typename decltype(from)::type;
    return visitAny(out.dtype, [&](auto to) {
      using T = typename decltype(to)::type;
      castLoop(in.as<S>(), out.as<T>(), in.numel());
      return Status::success();
    });
  });
}

Status castMulti(const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out) {
  SMP_RETURN_IF_ERROR(common::checkCastMulti(in, out));
  for (size_t i = 0; i < in.size(); ++i)
    SMP_RETURN_IF_ERROR(cast(in[i], out[i]));
  return Status::success();
}

} // namespace smp::kernels::cpu
