//===- Elementwise.cpp - Unary, binary (broadcasting) and where kernels ---===//

#include "Common.h"
#include "VecMath.h"

#include "smp/kernels/common/Elements.h"

#include <atomic>
#include <utility>

namespace smp::kernels::cpu {
using namespace detail;

namespace {

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

template <class C> C sigmoid(C x) {
  if (x >= 0)
    return C(1) / (C(1) + std::exp(-x));
  C e = std::exp(x);
  return e / (C(1) + e);
}

template <class C> C geluExact(C x) {
  return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
}

/// f64 (f32 and the half types go through VecMath): 0.5 x (1 + tanh u)
/// written as x sigmoid(2u), which keeps the low digits of 1 + tanh u for
/// negative x.
template <class C> C geluTanh(C x) {
  const C k = C(0.79788456080286535588); // sqrt(2 / pi)
  C a = C(2) * k * (x + C(0.044715) * x * x * x);
  C e = std::exp(-std::fabs(a));
  return (a < C(0) ? x * e : x) / (C(1) + e);
}

/// y[i] = fn(x[i]) over n elements in parallel.
template <class TIn, class TOut, class Fn>
void mapElements(const TIn *x, TOut *y, int64_t n, int64_t cost, Fn fn) {
  parallelFor(n, grainFor(cost), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = fn(x[i]);
  });
}

template <class S, class Fn>
Status mapFloat(const TensorRef &in, const TensorRef &out, int64_t cost,
                Fn fn) {
  mapElements(in.as<S>(), out.as<S>(), in.numel(), cost,
              [&](S v) { return Float<S>::store(fn(Float<S>::load(v))); });
  return Status::success();
}

/// The ops with a vectorised f32 form (VecMath.h).
bool vecOpFor(UnaryOp op, VecOp &v) {
  static constexpr std::pair<UnaryOp, VecOp> kVecOps[] = {
      {UnaryOp::Exp, VecOp::Exp},
      {UnaryOp::Tanh, VecOp::Tanh},
      {UnaryOp::Sigmoid, VecOp::Sigmoid},
      {UnaryOp::Silu, VecOp::Silu},
      {UnaryOp::GeluTanh, VecOp::GeluTanh}};
  for (auto [u, vec] : kVecOps)
    if (u == op) {
      v = vec;
      return true;
    }
  return false;
}

/// f32, f16 and bf16 through vecMap (the half types in blocks widened to
/// f32 on the stack).
template <class S>
void mapVec(VecOp v, const TensorRef &in, const TensorRef &out) {
  const S *x = in.as<S>();
  S *y = out.as<S>();
  bool stream = out.bytes() >= static_cast<size_t>(kStreamBytes);
  parallelFor(in.numel(), grainFor(8), [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<S, float>) {
      writeRun(y + b, e - b, stream, [&](float *p, int64_t i, int64_t l) {
        vecMap(v, x + b + i, p, l);
      });
      if (stream)
        streamFence();
    } else {
      constexpr int64_t kBlock = 256;
      float buf[kBlock];
      for (int64_t i = b; i < e; i += kBlock) {
        int64_t len = std::min(kBlock, e - i);
        for (int64_t k = 0; k < len; ++k)
          buf[k] = Float<S>::load(x[i + k]);
        vecMap(v, buf, buf, len);
        for (int64_t k = 0; k < len; ++k)
          y[i + k] = Float<S>::store(buf[k]);
      }
    }
  });
}

template <class S>
Status unaryFloat(UnaryOp op, const TensorRef &in, const TensorRef &out) {
  using C = typename Float<S>::C;
  if constexpr (!std::is_same_v<S, double>) {
    VecOp v;
    if (vecOpFor(op, v)) {
      mapVec<S>(v, in, out);
      return Status::success();
    }
  }
  switch (op) {
  case UnaryOp::Neg:
    return mapFloat<S>(in, out, 1, [](C x) { return -x; });
  case UnaryOp::Abs:
    return mapFloat<S>(in, out, 1, [](C x) { return std::fabs(x); });
  case UnaryOp::Exp:
    return mapFloat<S>(in, out, 8, [](C x) { return std::exp(x); });
  case UnaryOp::Log:
    return mapFloat<S>(in, out, 8, [](C x) { return std::log(x); });
  case UnaryOp::Sqrt:
    return mapFloat<S>(in, out, 4, [](C x) { return std::sqrt(x); });
  case UnaryOp::Rsqrt:
    return mapFloat<S>(in, out, 4, [](C x) { return C(1) / std::sqrt(x); });
  case UnaryOp::Reciprocal:
    return mapFloat<S>(in, out, 2, [](C x) { return C(1) / x; });
  case UnaryOp::Tanh:
    return mapFloat<S>(in, out, 8, [](C x) { return std::tanh(x); });
  case UnaryOp::Erf:
    return mapFloat<S>(in, out, 8, [](C x) { return std::erf(x); });
  case UnaryOp::Sigmoid:
    return mapFloat<S>(in, out, 8, [](C x) { return sigmoid(x); });
  case UnaryOp::Silu:
    return mapFloat<S>(in, out, 8, [](C x) { return x * sigmoid(x); });
  case UnaryOp::Relu: // NaN stays NaN
    return mapFloat<S>(in, out, 1, [](C x) { return x < C(0) ? C(0) : x; });
  case UnaryOp::Sin:
    return mapFloat<S>(in, out, 8, [](C x) { return std::sin(x); });
  case UnaryOp::Cos:
    return mapFloat<S>(in, out, 8, [](C x) { return std::cos(x); });
  case UnaryOp::Gelu:
    return mapFloat<S>(in, out, 8, [](C x) { return geluExact(x); });
  case UnaryOp::GeluTanh:
    return mapFloat<S>(in, out, 8, [](C x) { return geluTanh(x); });
  case UnaryOp::Not:
    break;
  }
  return unsupported(unaryOpName(op), in.dtype);
}

template <class T>
Status unaryInt(UnaryOp op, const TensorRef &in, const TensorRef &out) {
  using U = std::make_unsigned_t<T>;
  const T *x = in.as<T>();
  T *y = out.as<T>();
  int64_t n = in.numel();
  switch (op) {
  case UnaryOp::Neg: // wraps: -INT_MIN == INT_MIN
    mapElements(x, y, n, 1, [](T v) { return static_cast<T>(U(0) - U(v)); });
    return Status::success();
  case UnaryOp::Abs:
    mapElements(x, y, n, 1,
                [](T v) { return v < T(0) ? static_cast<T>(U(0) - U(v)) : v; });
    return Status::success();
  case UnaryOp::Relu:
    mapElements(x, y, n, 1, [](T v) { return v < T(0) ? T(0) : v; });
    return Status::success();
  default:
    return unsupported(unaryOpName(op), in.dtype);
  }
}

} // namespace

Status unary(UnaryOp op, const TensorRef &in, const TensorRef &out) {
  const char *name = unaryOpName(op);
  SMP_RETURN_IF_ERROR(checkSameTensor(name, in, out));
  if (smp::base::isFloat(in.dtype))
    return visitFloat(in.dtype, name, [&](auto tag) {
      return unaryFloat<typename decltype(tag)::type>(op, in, out);
    });
  if (in.dtype == DType::Bool) {
    if (op != UnaryOp::Not)
      return unsupported(name, in.dtype);
    mapElements(in.as<uint8_t>(), out.as<uint8_t>(), in.numel(), 1,
                [](uint8_t v) { return static_cast<uint8_t>(v == 0); });
    return Status::success();
  }
  return visitInt(in.dtype, name, [&](auto tag) {
    return unaryInt<typename decltype(tag)::type>(op, in, out);
  });
}

Status leakyRelu(const TensorRef &in, float alpha, const TensorRef &out) {
  SMP_RETURN_IF_ERROR(checkSameTensor("leaky_relu", in, out));
  return visitFloat(in.dtype, "leaky_relu", [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename Float<S>::C;
    C a = static_cast<C>(alpha);
    return mapFloat<S>(in, out, 1, [a](C x) { return x >= C(0) ? x : a * x; });
  });
}

Status gelu(const TensorRef &in, bool tanhApproximation, const TensorRef &out) {
  return unary(tanhApproximation ? UnaryOp::GeluTanh : UnaryOp::Gelu, in, out);
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

namespace {

/// o[pos..] = fn(a[..], b[..]) over a broadcasting loop, with fast paths for
/// contiguous and scalar-broadcast inner runs; large outputs are streamed.
template <class TIn, class TOut, class Fn>
void runBinary(const StridedLoop<2> &loop, const TIn *a, const TIn *b, TOut *o,
               int64_t total, Fn fn) {
  bool stream = total * static_cast<int64_t>(sizeof(TOut)) >= kStreamBytes;
  loop.parallelRuns(
      total, grainFor(2),
      [&](int64_t pos, const std::array<int64_t, 2> &off, int64_t len,
          const std::array<int64_t, 2> &inner) {
        const TIn *pa = a + off[0], *pb = b + off[1];
        writeRun(o + pos, len, stream, [&](TOut *po, int64_t i0, int64_t l) {
          if (inner[0] == 1 && inner[1] == 1) {
            const TIn *qa = pa + i0, *qb = pb + i0;
            for (int64_t i = 0; i < l; ++i)
              po[i] = fn(qa[i], qb[i]);
          } else if (inner[0] == 1 && inner[1] == 0) {
            const TIn *qa = pa + i0;
            TIn vb = *pb;
            for (int64_t i = 0; i < l; ++i)
              po[i] = fn(qa[i], vb);
          } else if (inner[0] == 0 && inner[1] == 1) {
            const TIn *qb = pb + i0;
            TIn va = *pa;
            for (int64_t i = 0; i < l; ++i)
              po[i] = fn(va, qb[i]);
          } else {
            for (int64_t i = 0; i < l; ++i)
              po[i] = fn(pa[(i0 + i) * inner[0]], pb[(i0 + i) * inner[1]]);
          }
        });
      },
      stream);
}

template <class C> C nanMax(C a, C b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<C>::quiet_NaN();
  return a < b ? b : a;
}
template <class C> C nanMin(C a, C b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<C>::quiet_NaN();
  return b < a ? b : a;
}

/// The remainder with the divisor's sign (numpy.mod, Python's %).
template <class C> C floorMod(C a, C b) {
  C r = std::fmod(a, b);
  if (r != C(0) && ((r < C(0)) != (b < C(0))))
    r += b;
  return r;
}

struct BinaryArgs {
  BinaryOp op;
  const StridedLoop<2> &loop;
  const TensorRef &lhs, &rhs, &out;
};

template <class S> Status binaryFloat(const BinaryArgs &x) {
  using C = typename Float<S>::C;
  const S *a = x.lhs.as<S>(), *b = x.rhs.as<S>();
  int64_t n = x.out.numel();
  auto arith = [&](auto fn) {
    runBinary(x.loop, a, b, x.out.as<S>(), n, [fn](S u, S v) {
      return Float<S>::store(fn(Float<S>::load(u), Float<S>::load(v)));
    });
    return Status::success();
  };
  auto compare = [&](auto fn) {
    runBinary(x.loop, a, b, x.out.as<uint8_t>(), n, [fn](S u, S v) {
      return static_cast<uint8_t>(fn(Float<S>::load(u), Float<S>::load(v)));
    });
    return Status::success();
  };
  switch (x.op) {
  case BinaryOp::Add:
    return arith([](C u, C v) { return u + v; });
  case BinaryOp::Sub:
    return arith([](C u, C v) { return u - v; });
  case BinaryOp::Mul:
    return arith([](C u, C v) { return u * v; });
  case BinaryOp::Div:
    return arith([](C u, C v) { return u / v; });
  case BinaryOp::Pow:
    return arith([](C u, C v) { return std::pow(u, v); });
  case BinaryOp::Max:
    return arith([](C u, C v) { return nanMax(u, v); });
  case BinaryOp::Min:
    return arith([](C u, C v) { return nanMin(u, v); });
  case BinaryOp::Equal:
    return compare([](C u, C v) { return u == v; });
  case BinaryOp::Less:
    return compare([](C u, C v) { return u < v; });
  case BinaryOp::Greater:
    return compare([](C u, C v) { return u > v; });
  case BinaryOp::Mod:
    return arith([](C u, C v) { return floorMod(u, v); });
  case BinaryOp::FMod:
    return arith([](C u, C v) { return std::fmod(u, v); });
  case BinaryOp::And:
  case BinaryOp::Or:
    break;
  }
  return unsupported(binaryOpName(x.op), x.lhs.dtype);
}

/// base^exp wrapping modulo 2^bits. A negative exponent gives 1 / base^|exp|
/// truncated toward zero: +-1 for |base| = 1, else 0 (also for base 0), as
/// the constant folder and onnxruntime do.
template <class T> T intPow(T base, T exp) {
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
  U r = 1, p = static_cast<U>(base);
  for (uint64_t e = static_cast<uint64_t>(exp); e; e >>= 1) {
    if (e & 1)
      r = static_cast<U>(r * p);
    p = static_cast<U>(p * p);
  }
  return static_cast<T>(r);
}

template <class T> Status binaryInt(const BinaryArgs &x) {
  using U = std::make_unsigned_t<T>;
  const T *a = x.lhs.as<T>(), *b = x.rhs.as<T>();
  int64_t n = x.out.numel();
  auto arith = [&](auto fn) {
    runBinary(x.loop, a, b, x.out.as<T>(), n, fn);
    return Status::success();
  };
  auto compare = [&](auto fn) {
    runBinary(x.loop, a, b, x.out.as<uint8_t>(), n,
              [fn](T u, T v) { return static_cast<uint8_t>(fn(u, v)); });
    return Status::success();
  };
  switch (x.op) {
  case BinaryOp::Add:
    return arith([](T u, T v) { return static_cast<T>(U(u) + U(v)); });
  case BinaryOp::Sub:
    return arith([](T u, T v) { return static_cast<T>(U(u) - U(v)); });
  case BinaryOp::Mul:
    return arith([](T u, T v) { return static_cast<T>(U(u) * U(v)); });
  case BinaryOp::Div: {
    std::atomic<bool> byZero{false};
    runBinary(x.loop, a, b, x.out.as<T>(), n, [&byZero](T u, T v) {
      if (v == T(0)) {
        byZero.store(true, std::memory_order_relaxed);
        return T(0);
      }
      if constexpr (std::is_signed_v<T>) {
        if (v == T(-1)) // INT_MIN / -1 wraps
          return static_cast<T>(U(0) - U(u));
      }
      return static_cast<T>(u / v);
    });
    if (byZero.load())
      return fail("div", "integer division by zero");
    return Status::success();
  }
  case BinaryOp::Mod:
  case BinaryOp::FMod: {
    bool floor = x.op == BinaryOp::Mod;
    std::atomic<bool> byZero{false};
    runBinary(x.loop, a, b, x.out.as<T>(), n, [&byZero, floor](T u, T v) {
      if (v == T(0)) {
        byZero.store(true, std::memory_order_relaxed);
        return T(0);
      }
      return intMod(u, v, floor);
    });
    if (byZero.load())
      return fail(binaryOpName(x.op), "integer division by zero");
    return Status::success();
  }
  case BinaryOp::Pow:
    return arith([](T u, T v) { return intPow(u, v); });
  case BinaryOp::Max:
    return arith([](T u, T v) { return u < v ? v : u; });
  case BinaryOp::Min:
    return arith([](T u, T v) { return v < u ? v : u; });
  case BinaryOp::Equal:
    return compare([](T u, T v) { return u == v; });
  case BinaryOp::Less:
    return compare([](T u, T v) { return u < v; });
  case BinaryOp::Greater:
    return compare([](T u, T v) { return u > v; });
  case BinaryOp::And:
  case BinaryOp::Or:
    break;
  }
  return unsupported(binaryOpName(x.op), x.lhs.dtype);
}

Status binaryBool(const BinaryArgs &x) {
  const uint8_t *a = x.lhs.as<uint8_t>(), *b = x.rhs.as<uint8_t>();
  uint8_t *o = x.out.as<uint8_t>();
  int64_t n = x.out.numel();
  auto run = [&](auto fn) {
    runBinary(x.loop, a, b, o, n, [fn](uint8_t u, uint8_t v) {
      return static_cast<uint8_t>(fn(u != 0, v != 0));
    });
    return Status::success();
  };
  switch (x.op) {
  case BinaryOp::And:
    return run([](bool u, bool v) { return u && v; });
  case BinaryOp::Or:
    return run([](bool u, bool v) { return u || v; });
  case BinaryOp::Equal:
    return run([](bool u, bool v) { return u == v; });
  case BinaryOp::Less:
    return run([](bool u, bool v) { return u < v; });
  case BinaryOp::Greater:
    return run([](bool u, bool v) { return u > v; });
  case BinaryOp::Max:
    return run([](bool u, bool v) { return u || v; });
  case BinaryOp::Min:
    return run([](bool u, bool v) { return u && v; });
  default:
    return unsupported(binaryOpName(x.op), x.lhs.dtype);
  }
}

bool isCompare(BinaryOp op) {
  return op == BinaryOp::Equal || op == BinaryOp::Less ||
         op == BinaryOp::Greater || op == BinaryOp::And || op == BinaryOp::Or;
}

} // namespace

Status binary(BinaryOp op, const TensorRef &lhs, const TensorRef &rhs,
              const TensorRef &out) {
  const char *name = binaryOpName(op);
  std::vector<int64_t> shape, sa, sb;
  SMP_RETURN_IF_ERROR(
      common::checkBinary(name, lhs, rhs, out, isCompare(op), shape, sa, sb));
  if (out.numel() == 0)
    return Status::success();
  StridedLoop<2> loop(shape, {sa, sb});
  BinaryArgs args{op, loop, lhs, rhs, out};
  if (lhs.dtype == DType::Bool)
    return binaryBool(args);
  if (smp::base::isFloat(lhs.dtype))
    return visitFloat(lhs.dtype, name, [&](auto tag) {
      return binaryFloat<typename decltype(tag)::type>(args);
    });
  return visitInt(lhs.dtype, name, [&](auto tag) {
    return binaryInt<typename decltype(tag)::type>(args);
  });
}

//===----------------------------------------------------------------------===//
// Where
//===----------------------------------------------------------------------===//

namespace {

/// One run of where with inner strides known at compile time (0: a
/// broadcast scalar, 1: contiguous) and the select written with bit masks
/// (T is an unsigned type of the element's size), so that it vectorises.
template <int SC, int SA, int SB, class T>
void whereRunFixed(const uint8_t *c, const T *a, const T *b, T *o,
                   int64_t len) {
  for (int64_t i = 0; i < len; ++i) {
    T mask = static_cast<T>(T(0) - T(c[i * SC] != 0));
    o[i] = static_cast<T>((a[i * SA] & mask) | (b[i * SB] & ~mask));
  }
}

template <class T>
void whereRun(const uint8_t *c, const T *a, const T *b, T *o, int64_t len,
              const std::array<int64_t, 3> &in) {
  auto is = [&](int64_t sc, int64_t sa, int64_t sb) {
    return in[0] == sc && in[1] == sa && in[2] == sb;
  };
  if (is(1, 1, 1))
    whereRunFixed<1, 1, 1>(c, a, b, o, len);
  else if (is(1, 0, 1)) // masked_fill: a scalar where the mask is set
    whereRunFixed<1, 0, 1>(c, a, b, o, len);
  else if (is(1, 1, 0))
    whereRunFixed<1, 1, 0>(c, a, b, o, len);
  else if (is(1, 0, 0))
    whereRunFixed<1, 0, 0>(c, a, b, o, len);
  else if (is(0, 1, 1))
    std::copy(*c ? a : b, (*c ? a : b) + len, o);
  else
    for (int64_t i = 0; i < len; ++i)
      o[i] = c[i * in[0]] ? a[i * in[1]] : b[i * in[2]];
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
  StridedLoop<3> loop(shape, {sc, sa, sb});
  const uint8_t *c = cond.as<uint8_t>();
  return visitBytes(out.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *a = lhs.as<T>(), *b = rhs.as<T>();
    T *o = out.as<T>();
    bool stream = n * static_cast<int64_t>(sizeof(T)) >= kStreamBytes;
    loop.parallelRuns(
        n, grainFor(2),
        [&](int64_t pos, const std::array<int64_t, 3> &off, int64_t len,
            const std::array<int64_t, 3> &in) {
          writeRun(o + pos, len, stream, [&](T *po, int64_t i0, int64_t l) {
            whereRun(c + off[0] + i0 * in[0], a + off[1] + i0 * in[1],
                     b + off[2] + i0 * in[2], po, l, in);
          });
        },
        stream);
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
