//===- Elementwise.cu - Unary, binary (broadcasting) and where kernels ----===//
//
// One grid-stride kernel per storage type; the op is a run-time switch (the
// same for every thread, so it costs a few instructions and keeps the number
// of instantiations small). Broadcasting reads the operands through
// Strided<N> (dims merged, at most 8 left). f16/bf16 tensors of whole
// aligned 16-byte vectors take kernels with the op a template parameter
// instead, a vector a thread: same-shape add, sub and mul
// (binaryVecKernel) and the activations (unaryVecKernel).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include <type_traits>

namespace smp::kernels::cuda {
using namespace detail;

namespace {

template <class C> __device__ C sigmoidC(C x) {
  if (x >= C(0))
    return C(1) / (C(1) + dExp(-x));
  C e = dExp(x);
  return e / (C(1) + e);
}

/// 0.5 x (1 + tanh u) written as x sigmoid(2u) (the CPU's form).
template <class C> __device__ C geluTanhC(C x) {
  const C k = C(0.79788456080286535588); // sqrt(2 / pi)
  C a = C(2) * k * (x + C(0.044715) * x * x * x);
  C e = dExp(-dAbs(a));
  return (a < C(0) ? x * e : x) / (C(1) + e);
}

template <class C> __device__ C unaryMath(UnaryOp op, C x) {
  switch (op) {
  case UnaryOp::Neg:
    return -x;
  case UnaryOp::Abs:
    return dAbs(x);
  case UnaryOp::Exp:
    return dExp(x);
  case UnaryOp::Log:
    return dLog(x);
  case UnaryOp::Sqrt:
    return dSqrt(x);
  case UnaryOp::Rsqrt:
    return C(1) / dSqrt(x);
  case UnaryOp::Reciprocal:
    return C(1) / x;
  case UnaryOp::Tanh:
    return dTanh(x);
  case UnaryOp::Erf:
    return dErf(x);
  case UnaryOp::Sigmoid:
    return sigmoidC(x);
  case UnaryOp::Silu:
    return x * sigmoidC(x);
  case UnaryOp::Relu: // NaN stays NaN
    return x < C(0) ? C(0) : x;
  case UnaryOp::Sin:
    return dSin(x);
  case UnaryOp::Cos:
    return dCos(x);
  case UnaryOp::Gelu:
    return C(0.5) * x * (C(1) + dErf(x * C(0.70710678118654752440)));
  case UnaryOp::GeluTanh:
    return geluTanhC(x);
  case UnaryOp::Not:
    break;
  }
  return x;
}

bool floatUnary(UnaryOp op) { return op != UnaryOp::Not; }

template <class S>
__global__ void unaryFloatKernel(UnaryOp op, const S *x, S *y, int64_t n) {
  SMP_GRID_STRIDE(i, n) {
    y[i] = FT<S>::store(unaryMath(op, FT<S>::load(x[i])));
  }
}

/// unaryFloatKernel for f16/bf16 over 16-byte vectors with the op a
/// template parameter: the same arithmetic per element (unaryMath in f32).
/// An activation over a transformer's [tokens, 4 hidden] (an erf GELU, which
/// no cuBLASLt epilogue computes; SiLU) had taken 2-byte loads and the op's
/// switch per element.
template <class S, UnaryOp kOp>
__global__ void unaryVecKernel(const Pack<S> *x, Pack<S> *y, int64_t nv) {
  SMP_GRID_STRIDE(i, nv) {
    Pack<S> p = x[i], r;
#pragma unroll
    for (int k = 0; k < Pack<S>::N; ++k)
      r.v[k] = FT<S>::store(unaryMath(kOp, FT<S>::load(p.v[k])));
    y[i] = r;
  }
}

/// Launches unaryVecKernel<S, op> when op is one of kOps; `taken` says.
template <class S, UnaryOp... kOps>
Status unaryVecOf(const char *name, UnaryOp op, const Pack<S> *x, Pack<S> *y,
                  int64_t nv, bool &taken) {
  Status s = Status::success();
  taken = ((op == kOps &&
            (s = launch(name, nv, unaryVecKernel<S, kOps>, x, y, nv), true)) ||
           ...);
  return s;
}

/// Launches unaryVecKernel when it takes the case: an activation (GELU
/// either form, SiLU, ReLU, sigmoid, tanh) of f16/bf16, whole vectors, both
/// pointers 16-byte aligned; `taken` says.
template <class S>
Status unaryVec(const char *name, UnaryOp op, const TensorRef &in,
                const TensorRef &out, int64_t n, bool &taken) {
  using P = Pack<S>;
  taken = false;
  if constexpr (kHalf<S>) {
    if (n % P::N != 0 || !aligned16({in.data, out.data}))
      return Status::success();
    return unaryVecOf<S, UnaryOp::Gelu, UnaryOp::GeluTanh, UnaryOp::Silu,
                      UnaryOp::Relu, UnaryOp::Sigmoid, UnaryOp::Tanh>(
        name, op, in.as<P>(), out.as<P>(), n / P::N, taken);
  }
  return Status::success();
}

template <class S>
__global__ void leakyReluKernel(const S *x, S *y, int64_t n, float alpha) {
  using C = typename FT<S>::C;
  C a = static_cast<C>(alpha);
  SMP_GRID_STRIDE(i, n) {
    C v = FT<S>::load(x[i]);
    y[i] = FT<S>::store(v >= C(0) ? v : a * v);
  }
}

template <class T>
__global__ void unaryIntKernel(UnaryOp op, const T *x, T *y, int64_t n) {
  using U = std::make_unsigned_t<T>;
  SMP_GRID_STRIDE(i, n) {
    T v = x[i];
    T r = v;
    if (op == UnaryOp::Neg) // wraps: -INT_MIN == INT_MIN
      r = static_cast<T>(U(0) - U(v));
    else if (op == UnaryOp::Abs)
      r = isNegative(v) ? static_cast<T>(U(0) - U(v)) : v;
    else if (op == UnaryOp::Relu)
      r = isNegative(v) ? T(0) : v;
    y[i] = r;
  }
}

__global__ void notKernel(const uint8_t *x, uint8_t *y, int64_t n) {
  SMP_GRID_STRIDE(i, n) { y[i] = static_cast<uint8_t>(x[i] == 0); }
}

} // namespace

Status unary(UnaryOp op, const TensorRef &in, const TensorRef &out) {
  const char *name = unaryOpName(op);
  SMP_RETURN_IF_ERROR(checkSameTensor(name, in, out));
  int64_t n = in.numel();
  if (smp::base::isFloat(in.dtype)) {
    if (!floatUnary(op))
      return unsupported(name, in.dtype);
    return visitFloat(in.dtype, name, [&](auto tag) {
      using S = typename decltype(tag)::type;
      bool taken;
      SMP_RETURN_IF_ERROR(unaryVec<S>(name, op, in, out, n, taken));
      if (taken)
        return Status::success();
      return launch(name, n, unaryFloatKernel<S>, op, in.as<S>(), out.as<S>(),
                    n);
    });
  }
  if (in.dtype == DType::Bool) {
    if (op != UnaryOp::Not)
      return unsupported(name, in.dtype);
    return launch(name, n, notKernel, in.as<uint8_t>(), out.as<uint8_t>(), n);
  }
  if (op != UnaryOp::Neg && op != UnaryOp::Abs && op != UnaryOp::Relu)
    return unsupported(name, in.dtype);
  return visitInt(in.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch(name, n, unaryIntKernel<T>, op, in.as<T>(), out.as<T>(), n);
  });
}

Status leakyRelu(const TensorRef &in, float alpha, const TensorRef &out) {
  const char *name = "leaky_relu";
  SMP_RETURN_IF_ERROR(checkSameTensor(name, in, out));
  int64_t n = in.numel();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return launch(name, n, leakyReluKernel<S>, in.as<S>(), out.as<S>(), n,
                  alpha);
  });
}

Status gelu(const TensorRef &in, bool tanhApproximation, const TensorRef &out) {
  return unary(tanhApproximation ? UnaryOp::GeluTanh : UnaryOp::Gelu, in, out);
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

namespace {

bool isCompare(BinaryOp op) {
  return op == BinaryOp::Equal || op == BinaryOp::Less ||
         op == BinaryOp::Greater || op == BinaryOp::And || op == BinaryOp::Or;
}

template <class C> __device__ C nanMax(C a, C b) {
  if (isNaN(a) || isNaN(b))
    return a + b; // NaN
  return a < b ? b : a;
}
template <class C> __device__ C nanMin(C a, C b) {
  if (isNaN(a) || isNaN(b))
    return a + b;
  return b < a ? b : a;
}

/// A comparison (Equal, Less, Greater) as a Bool element.
template <class C> __device__ uint8_t compare(BinaryOp op, C u, C v) {
  return static_cast<uint8_t>(op == BinaryOp::Equal  ? u == v
                              : op == BinaryOp::Less ? u < v
                                                     : u > v);
}

template <class S>
__global__ void binaryFloatKernel(BinaryOp op, const S *a, const S *b,
                                  void *out, Strided<2> st, int64_t n) {
  using C = typename FT<S>::C;
  S *o = static_cast<S *>(out);
  uint8_t *ob = static_cast<uint8_t *>(out);
  SMP_GRID_STRIDE(i, n) {
    int64_t off[2];
    st.offsets(i, off);
    C u = FT<S>::load(a[off[0]]), v = FT<S>::load(b[off[1]]);
    switch (op) {
    case BinaryOp::Add:
      o[i] = FT<S>::store(u + v);
      break;
    case BinaryOp::Sub:
      o[i] = FT<S>::store(u - v);
      break;
    case BinaryOp::Mul:
      o[i] = FT<S>::store(u * v);
      break;
    case BinaryOp::Div:
      o[i] = FT<S>::store(u / v);
      break;
    case BinaryOp::Pow:
      o[i] = FT<S>::store(dPow(u, v));
      break;
    case BinaryOp::Mod: { // the divisor's sign
      C r = dFmod(u, v);
      if (r != C(0) && ((r < C(0)) != (v < C(0))))
        r += v;
      o[i] = FT<S>::store(r);
      break;
    }
    case BinaryOp::FMod:
      o[i] = FT<S>::store(dFmod(u, v));
      break;
    case BinaryOp::Max:
      o[i] = FT<S>::store(nanMax(u, v));
      break;
    case BinaryOp::Min:
      o[i] = FT<S>::store(nanMin(u, v));
      break;
    default: // Equal, Less, Greater (the only others binary() lets through)
      ob[i] = compare(op, u, v);
      break;
    }
  }
}

/// a op b for Add, Sub and Mul over operands of the result's shape, all
/// contiguous (no broadcast), 16 bytes at a time: binaryFloatKernel's
/// arithmetic per element. A transformer step's residual adds ran at 944
/// GB/s on an H200 through binaryFloatKernel (an index decomposed per
/// element, 2-byte loads, the op chosen per element).
template <class S, BinaryOp kOp>
__global__ void binaryVecKernel(const Pack<S> *a, const Pack<S> *b, Pack<S> *o,
                                int64_t nv) {
  using C = typename FT<S>::C;
  SMP_GRID_STRIDE(i, nv) {
    Pack<S> x = a[i], y = b[i], r;
#pragma unroll
    for (int k = 0; k < Pack<S>::N; ++k) {
      C u = FT<S>::load(x.v[k]), v = FT<S>::load(y.v[k]);
      r.v[k] = FT<S>::store(kOp == BinaryOp::Add   ? u + v
                            : kOp == BinaryOp::Sub ? u - v
                                                   : u * v);
    }
    o[i] = r;
  }
}

/// Launches binaryVecKernel when it takes the case: Add, Sub or Mul, both
/// operands contiguous in the result's shape (st merged to one dim of
/// stride 1), n whole vectors, every pointer 16-byte aligned; `taken` says.
template <class S>
Status binaryVec(const char *name, const Context *ctx, BinaryOp op,
                 const Strided<2> &st, int64_t n, const TensorRef &a,
                 const TensorRef &b, const TensorRef &out, bool &taken) {
  using P = Pack<S>;
  taken = (op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mul) &&
          st.rank == 1 && st.stride[0][0] == 1 && st.stride[1][0] == 1 &&
          n % P::N == 0 && aligned16({a.data, b.data, out.data});
  if (!taken)
    return Status::success();
  auto launch = [&](auto kernel) {
    return launchGrid(name, ctx, n / P::N, kernel, a.as<P>(), b.as<P>(),
                      out.as<P>(), n / P::N);
  };
  if (op == BinaryOp::Add)
    return launch(binaryVecKernel<S, BinaryOp::Add>);
  if (op == BinaryOp::Sub)
    return launch(binaryVecKernel<S, BinaryOp::Sub>);
  return launch(binaryVecKernel<S, BinaryOp::Mul>);
}

/// base^exp wrapping; a negative exponent gives +-1 for |base| 1, else 0.
template <class T> __device__ T intPow(T base, T exp) {
  using U = std::make_unsigned_t<T>;
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == T(1))
        return T(1);
      if (base == T(-1))
        return (exp & 1) ? T(-1) : T(1);
      return T(0);
    }
  }
  // In 64 bits (no promotion of narrow unsigned types to int, whose
  // overflow is undefined); truncating to T at the end wraps as T would.
  uint64_t r = 1, p = static_cast<uint64_t>(static_cast<U>(base));
  for (uint64_t e = static_cast<uint64_t>(exp); e; e >>= 1) {
    if (e & 1)
      r *= p;
    p *= p;
  }
  return static_cast<T>(static_cast<U>(r));
}

template <class T>
__global__ void binaryIntKernel(BinaryOp op, const T *a, const T *b, void *out,
                                Strided<2> st, int64_t n, DeviceError *err) {
  using U = std::make_unsigned_t<T>;
  using W = uint64_t; // wrapping arithmetic, truncated to T's width
  T *o = static_cast<T *>(out);
  uint8_t *ob = static_cast<uint8_t *>(out);
  SMP_GRID_STRIDE(i, n) {
    int64_t off[2];
    st.offsets(i, off);
    T u = a[off[0]], v = b[off[1]];
    switch (op) {
    case BinaryOp::Add:
      o[i] = static_cast<T>(static_cast<U>(W(U(u)) + W(U(v))));
      break;
    case BinaryOp::Sub:
      o[i] = static_cast<T>(static_cast<U>(W(U(u)) - W(U(v))));
      break;
    case BinaryOp::Mul:
      o[i] = static_cast<T>(static_cast<U>(W(U(u)) * W(U(v))));
      break;
    case BinaryOp::Div: {
      T r;
      if (v == T(0)) {
        raiseError(err, kErrDivByZero, 0, i, 0, 0);
        r = T(0);
      } else if (std::is_signed_v<T> && v == static_cast<T>(-1)) {
        r = static_cast<T>(U(0) - U(u)); // INT_MIN / -1 wraps
      } else {
        r = static_cast<T>(u / v);
      }
      o[i] = r;
      break;
    }
    case BinaryOp::Pow:
      o[i] = intPow(u, v);
      break;
    case BinaryOp::Mod:
    case BinaryOp::FMod: {
      bool floor = op == BinaryOp::Mod;
      T r = T(0);
      if (v == T(0)) {
        raiseError(err, kErrModByZero, 0, i, 0, floor ? 0 : 1);
      } else {
        r = intMod(u, v, floor);
      }
      o[i] = r;
      break;
    }
    case BinaryOp::Max:
      o[i] = u < v ? v : u;
      break;
    case BinaryOp::Min:
      o[i] = v < u ? v : u;
      break;
    default: // Equal, Less, Greater (the only others binary() lets through)
      ob[i] = compare(op, u, v);
      break;
    }
  }
}

__global__ void binaryBoolKernel(BinaryOp op, const uint8_t *a,
                                 const uint8_t *b, uint8_t *o, Strided<2> st,
                                 int64_t n) {
  SMP_GRID_STRIDE(i, n) {
    int64_t off[2];
    st.offsets(i, off);
    bool u = a[off[0]] != 0, v = b[off[1]] != 0, r = false;
    switch (op) {
    case BinaryOp::And:
    case BinaryOp::Min:
      r = u && v;
      break;
    case BinaryOp::Or:
    case BinaryOp::Max:
      r = u || v;
      break;
    case BinaryOp::Equal:
      r = u == v;
      break;
    case BinaryOp::Less:
      r = !u && v;
      break;
    case BinaryOp::Greater:
      r = u && !v;
      break;
    default:
      break;
    }
    o[i] = static_cast<uint8_t>(r);
  }
}

} // namespace

Status binary(BinaryOp op, const TensorRef &lhs, const TensorRef &rhs,
              const TensorRef &out) {
  const char *name = binaryOpName(op);
  std::vector<int64_t> shape, sa, sb;
  SMP_RETURN_IF_ERROR(
      common::checkBinary(name, lhs, rhs, out, isCompare(op), shape, sa, sb));
  // Which ops each dtype class supports (the CPU's lists).
  bool isBool = lhs.dtype == DType::Bool, isF = smp::base::isFloat(lhs.dtype);
  bool logic = op == BinaryOp::And || op == BinaryOp::Or;
  if (isBool ? !(logic || op == BinaryOp::Equal || op == BinaryOp::Less ||
                 op == BinaryOp::Greater || op == BinaryOp::Max ||
                 op == BinaryOp::Min)
             : (logic || (!isF && !smp::base::isInteger(lhs.dtype))))
    return unsupported(name, lhs.dtype);
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  Strided<2> st;
  SMP_RETURN_IF_ERROR(makeStrided<2>(name, shape, {sa, sb}, st));
  if (isBool)
    return launchGrid(name, ctx, n, binaryBoolKernel, op, lhs.as<uint8_t>(),
                      rhs.as<uint8_t>(), out.as<uint8_t>(), st, n);
  if (isF)
    return visitFloat(lhs.dtype, name, [&](auto tag) {
      using S = typename decltype(tag)::type;
      bool taken = false;
      SMP_RETURN_IF_ERROR(
          binaryVec<S>(name, ctx, op, st, n, lhs, rhs, out, taken));
      if (taken)
        return Status::success();
      return launchGrid(name, ctx, n, binaryFloatKernel<S>, op, lhs.as<S>(),
                        rhs.as<S>(), out.data, st, n);
    });
  return visitInt(lhs.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchGrid(name, ctx, n, binaryIntKernel<T>, op, lhs.as<T>(),
                      rhs.as<T>(), out.data, st, n, ctx->dError);
  });
}

//===----------------------------------------------------------------------===//
// Where
//===----------------------------------------------------------------------===//

namespace {

template <class T>
__global__ void whereKernel(const uint8_t *c, const T *a, const T *b, T *o,
                            Strided<3> st, int64_t n) {
  SMP_GRID_STRIDE(i, n) {
    int64_t off[3];
    st.offsets(i, off);
    o[i] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

} // namespace

Status where(const TensorRef &cond, const TensorRef &lhs, const TensorRef &rhs,
             const TensorRef &out) {
  const char *name = "where";
  std::vector<int64_t> shape, sc, sa, sb;
  SMP_RETURN_IF_ERROR(
      common::checkWhere(cond, lhs, rhs, out, shape, sc, sa, sb));
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  Strided<3> st;
  SMP_RETURN_IF_ERROR(makeStrided<3>(name, shape, {sc, sa, sb}, st));
  return visitBytes(out.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch(name, n, whereKernel<T>, cond.as<uint8_t>(), lhs.as<T>(),
                  rhs.as<T>(), out.as<T>(), st, n);
  });
}

} // namespace smp::kernels::cuda
