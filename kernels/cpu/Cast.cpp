//===- Cast.cpp - Element type conversion between any two dtypes ----------===//
//
// Every source element is widened to double (floats), int64 (signed ints,
// Bool) or uint64 (unsigned ints), then narrowed to the target type.
// add_multi's f32 sums of operands widened from 16 bits are here too.
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

Status addMulti(const std::vector<TensorRef> &lhs,
                const std::vector<TensorRef> &rhs,
                const std::vector<TensorRef> &out) {
  SMP_RETURN_IF_ERROR(common::checkAddMulti(lhs, rhs, out));
  for (size_t i = 0; i < out.size(); ++i) {
    float *o = out[i].as<float>();
    int64_t n = out[i].numel();
    SMP_RETURN_IF_ERROR(visitFloat(lhs[i].dtype, "add_multi", [&](auto l) {
      using L = typename decltype(l)::type;
      return visitFloat(rhs[i].dtype, "add_multi", [&](auto r) {
        using R = typename decltype(r)::type;
        const L *a = lhs[i].as<L>();
        const R *b = rhs[i].as<R>();
        for (int64_t j = 0; j < n; ++j)
          o[j] = static_cast<float>(Float<L>::load(a[j])) +
                 static_cast<float>(Float<R>::load(b[j]));
        return Status::success();
      });
    }));
  }
  return Status::success();
}

} // namespace smp::kernels::cpu
