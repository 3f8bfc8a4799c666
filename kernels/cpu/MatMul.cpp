//===- MatMul.cpp - Batched matrix product (numpy.matmul + transposes) ----===//

#include "Common.h"
#include "VecMath.h"

#include <functional>

namespace smp::kernels::cpu {
using namespace detail;

namespace {

/// The product's geometry (common::MatMulShape: stored matrices are rowsX x
/// colsX; op(A) is M x K, op(B) is K x N); batch b multiplies A + offA[b] by
/// B + offB[b] (elements).
struct Geometry : common::MatMulShape {
  std::vector<int64_t> offA, offB;
  bool foldBatchIntoM = false; // one GEMM with nb * M rows
};

/// C[nb][M][N] = op(A) op(B) through cblas ?gemm, split over the threads
/// by gemmBatch.
template <class T>
void gemmAll(const Geometry &g, const T *a, const T *b, T *c) {
  int64_t nb = static_cast<int64_t>(g.offA.size());
  GemmShape s;
  s.transA = g.transA;
  s.transB = g.transB;
  s.m = g.M;
  s.n = g.N;
  s.k = g.K;
  s.lda = std::max<int64_t>(1, g.colsA);
  s.ldb = std::max<int64_t>(1, g.colsB);
  s.ldc = std::max<int64_t>(1, g.N);
  if (g.foldBatchIntoM) {
    s.m = nb * g.M;
    gemm(s, a, b, c);
    return;
  }
  gemmBatch(s, a, g.offA.data(), b, g.offB.data(), c, g.M * g.N, nb);
}

/// Integer product with a plain loop (wrapping arithmetic).
template <class T>
void intMatMul(const Geometry &g, const T *a, const T *b, T *c) {
  using U = uint64_t; // wraps; reduced to T's width at the end
  int64_t nb = static_cast<int64_t>(g.offA.size());
  // Element (i, k) of op(A) and (k, j) of op(B).
  int64_t aI = g.transA ? 1 : g.colsA, aK = g.transA ? g.colsA : 1;
  int64_t bK = g.transB ? 1 : g.colsB, bJ = g.transB ? g.colsB : 1;
  parallelFor(nb * g.M, grainFor(g.K * g.N), [&](int64_t begin, int64_t end) {
    std::vector<U> acc(static_cast<size_t>(g.N));
    for (int64_t row = begin; row < end; ++row) {
      int64_t bi = row / g.M, i = row % g.M;
      const T *pa = a + g.offA[bi] + i * aI;
      const T *pb = b + g.offB[bi];
      std::fill(acc.begin(), acc.end(), U(0));
      for (int64_t k = 0; k < g.K; ++k) {
        U av = static_cast<U>(static_cast<int64_t>(pa[k * aK]));
        const T *bk = pb + k * bK;
        for (int64_t j = 0; j < g.N; ++j)
          acc[j] += av * static_cast<U>(static_cast<int64_t>(bk[j * bJ]));
      }
      T *pc = c + row * g.N;
      for (int64_t j = 0; j < g.N; ++j)
        pc[j] = static_cast<T>(acc[j]);
    }
  });
}

template <class S> std::vector<float> widenToF32(const TensorRef &t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  const S *p = t.as<S>();
  parallelFor(t.numel(), grainFor(2), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      v[i] = Float<S>::load(p[i]);
  });
  return v;
}

} // namespace

namespace {

/// What an f16/bf16 product's f32 result (out's shape, row-major) becomes:
/// the epilogue writes out (and its other results) from it.
using HalfEpilogue = std::function<Status(const float *product)>;

/// matmul; an f16/bf16 product goes through `epilogue` when given (else it
/// is rounded to out), which sees the f32 sums before any rounding.
Status runProduct(const TensorRef &lhs, const TensorRef &rhs,
                  const TensorRef &out, bool transposeLhs, bool transposeRhs,
                  const HalfEpilogue *epilogue = nullptr) {
  const char *name = "matmul";
  Geometry g;
  SMP_RETURN_IF_ERROR(
      common::matmulShape(lhs, rhs, out, transposeLhs, transposeRhs, g));
  if (out.numel() == 0)
    return Status::success();

  int64_t nb = product(g.batch);
  g.offA.resize(nb);
  g.offB.resize(nb);
  StridedLoop<2>(g.batch, {g.strA, g.strB})
      .forEachRun(0, nb,
                  [&](int64_t pos, const std::array<int64_t, 2> &off,
                      int64_t len, const std::array<int64_t, 2> &in) {
                    for (int64_t i = 0; i < len; ++i) {
                      g.offA[pos + i] = off[0] + i * in[0];
                      g.offB[pos + i] = off[1] + i * in[1];
                    }
                  });
  g.foldBatchIntoM =
      !g.transA && product(g.batchB) == 1 && product(g.batchA) == nb;

  bool half = lhs.dtype == DType::F16 || lhs.dtype == DType::BF16;
  if (g.K == 0 && !half) { // empty sum: zeros of any dtype are zero bytes
    std::fill_n(static_cast<uint8_t *>(out.data), out.bytes(), uint8_t(0));
    return Status::success();
  }
  switch (lhs.dtype) {
  case DType::F32:
    gemmAll(g, lhs.as<float>(), rhs.as<float>(), out.as<float>());
    return Status::success();
  case DType::F64:
    gemmAll(g, lhs.as<double>(), rhs.as<double>(), out.as<double>());
    return Status::success();
  case DType::F16:
  case DType::BF16:
    return visitFloat(lhs.dtype, name, [&](auto tag) {
      using S = typename decltype(tag)::type;
      std::vector<float> c(static_cast<size_t>(out.numel()));
      if (g.K > 0) {
        std::vector<float> a = widenToF32<S>(lhs), b = widenToF32<S>(rhs);
        gemmAll(g, a.data(), b.data(), c.data());
      }
      if (epilogue)
        return (*epilogue)(c.data());
      S *o = out.as<S>();
      parallelFor(out.numel(), grainFor(2), [&](int64_t b0, int64_t e) {
        for (int64_t i = b0; i < e; ++i)
          o[i] = Float<S>::store(c[i]);
      });
      return Status::success();
    });
  default:
    return visitInt(lhs.dtype, name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      intMatMul(g, lhs.as<T>(), rhs.as<T>(), out.as<T>());
      return Status::success();
    });
  }
}

/// The f16/bf16 product into out's shape, each of its rows written by
/// `fn(row, c, v)` from the row's f32 sums c (n = out's last dim; v an
/// n-float scratch row of the calling thread), rows in parallel.
template <class Fn>
Status productRows(const TensorRef &lhs, const TensorRef &rhs,
                   const TensorRef &out, bool transposeLhs, bool transposeRhs,
                   Fn fn) {
  int64_t n = out.shape.back();
  HalfEpilogue epilogue = [&](const float *p) {
    parallelFor(out.numel() / n, grainFor(8 * n), [&](int64_t r0, int64_t r1) {
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t r = r0; r < r1; ++r)
        fn(r, p + r * n, v.data());
    });
    return Status::success();
  };
  return runProduct(lhs, rhs, out, transposeLhs, transposeRhs, &epilogue);
}

} // namespace

Status matmul(const TensorRef &lhs, const TensorRef &rhs, const TensorRef &out,
              bool transposeLhs, bool transposeRhs) {
  SMP_RETURN_IF_ERROR(common::checkMatMulOperands(lhs, rhs, out));
  return runProduct(lhs, rhs, out, transposeLhs, transposeRhs, nullptr);
}

Status matmulBias(const TensorRef &lhs, const TensorRef &rhs,
                  const TensorRef &bias, const TensorRef &out,
                  bool transposeLhs, bool transposeRhs) {
  SMP_RETURN_IF_ERROR(common::checkMatMulOperands(lhs, rhs, out));
  SMP_RETURN_IF_ERROR(common::checkMatMulBias(rhs, bias, out));
  if (lhs.dtype != DType::F16 && lhs.dtype != DType::BF16) {
    // f32/f64: the product is already in out's type; the add rounds once.
    SMP_RETURN_IF_ERROR(runProduct(lhs, rhs, out, transposeLhs, transposeRhs));
    return binary(BinaryOp::Add, out, bias, out);
  }
  // f16/bf16: the bias joins the f32 product before its one rounding, as in
  // cuBLASLt's epilogue.
  return visitFloat(lhs.dtype, "matmul_bias", [&](auto tag) {
    using S = typename decltype(tag)::type;
    std::vector<float> bw = widenToF32<S>(bias);
    int64_t n = static_cast<int64_t>(bw.size());
    S *o = out.as<S>();
    return productRows(lhs, rhs, out, transposeLhs, transposeRhs,
                       [&](int64_t r, const float *c, float *) {
                         for (int64_t j = 0; j < n; ++j)
                           o[r * n + j] = Float<S>::store(c[j] + bw[j]);
                       });
  });
}

/// op(lhs) op(rhs) (+ *bias where given) + addend into out: f16/bf16 the
/// bias and the addend join the f32 product before its one rounding, as
/// cuBLASLt adds them (C with beta = 1) in its epilogue; f32/f64 (and empty
/// results) the ops' own roundings, product, bias's add, addend's add.
static Status productPlusAddend(const char *op, const TensorRef &lhs,
                                const TensorRef &rhs, const TensorRef *bias,
                                const TensorRef &addend, const TensorRef &out,
                                bool transposeLhs, bool transposeRhs) {
  if ((lhs.dtype != DType::F16 && lhs.dtype != DType::BF16) ||
      out.rank() == 0 || out.numel() == 0) {
    SMP_RETURN_IF_ERROR(
        bias ? matmulBias(lhs, rhs, *bias, out, transposeLhs, transposeRhs)
             : runProduct(lhs, rhs, out, transposeLhs, transposeRhs));
    return binary(BinaryOp::Add, out, addend, out);
  }
  return visitFloat(lhs.dtype, op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    int64_t n = out.shape.back();
    std::vector<float> bw = bias ? widenToF32<S>(*bias) : std::vector<float>();
    const S *r = addend.as<S>();
    S *o = out.as<S>();
    return productRows(lhs, rhs, out, transposeLhs, transposeRhs,
                       [&](int64_t row, const float *c, float *) {
                         for (int64_t j = 0; j < n; ++j) {
                           float v = bias ? c[j] + bw[j] : c[j];
                           o[row * n + j] = Float<S>::store(
                               v + Float<S>::load(r[row * n + j]));
                         }
                       });
  });
}

Status matmulAdd(const TensorRef &lhs, const TensorRef &rhs,
                 const TensorRef &addend, const TensorRef &out,
                 bool transposeLhs, bool transposeRhs) {
  SMP_RETURN_IF_ERROR(common::checkMatMulOperands(lhs, rhs, out));
  SMP_RETURN_IF_ERROR(common::checkMatMulAdd(addend, out));
  return productPlusAddend("matmul_add", lhs, rhs, nullptr, addend, out,
                           transposeLhs, transposeRhs);
}

Status matmulBiasAdd(const TensorRef &lhs, const TensorRef &rhs,
                     const TensorRef &bias, const TensorRef &addend,
                     const TensorRef &out, bool transposeLhs,
                     bool transposeRhs) {
  SMP_RETURN_IF_ERROR(common::checkMatMulOperands(lhs, rhs, out));
  SMP_RETURN_IF_ERROR(common::checkMatMulBiasAdd(rhs, bias, addend, out));
  return productPlusAddend("matmul_bias_add", lhs, rhs, &bias, addend, out,
                           transposeLhs, transposeRhs);
}

Status matmulBiasGelu(const TensorRef &lhs, const TensorRef &rhs,
                      const TensorRef &bias, const TensorRef &out,
                      const TensorRef &pre, bool transposeLhs,
                      bool transposeRhs) {
  SMP_RETURN_IF_ERROR(
      common::checkGeluEpilogue("matmul_bias_gelu", lhs, rhs, out, pre, bias));
  return visitFloat(lhs.dtype, "matmul_bias_gelu", [&](auto tag) {
    using S = typename decltype(tag)::type;
    std::vector<float> bw = widenToF32<S>(bias);
    int64_t n = static_cast<int64_t>(bw.size());
    S *o = out.as<S>(), *pr = pre.as<S>();
    return productRows(lhs, rhs, out, transposeLhs, transposeRhs,
                       [&](int64_t r, const float *c, float *v) {
                         for (int64_t j = 0; j < n; ++j) {
                           v[j] = c[j] + bw[j];
                           pr[r * n + j] = Float<S>::store(v[j]);
                         }
                         // Of the f32 sum, then rounded.
                         vecMap(VecOp::GeluTanh, v, v, n);
                         for (int64_t j = 0; j < n; ++j)
                           o[r * n + j] = Float<S>::store(v[j]);
                       });
  });
}

Status matmulGeluGrad(const TensorRef &lhs, const TensorRef &rhs,
                      const TensorRef &pre, const TensorRef &dx,
                      const TensorRef &dbias, bool transposeLhs,
                      bool transposeRhs) {
  SMP_RETURN_IF_ERROR(
      common::checkGeluEpilogue("matmul_gelu_grad", lhs, rhs, dx, pre, dbias));
  SMP_RETURN_IF_ERROR(visitFloat(lhs.dtype, "matmul_gelu_grad", [&](auto tag) {
    using S = typename decltype(tag)::type;
    int64_t n = dx.shape.back();
    const S *x = pre.as<S>();
    S *o = dx.as<S>();
    return productRows(lhs, rhs, dx, transposeLhs, transposeRhs,
                       [&](int64_t r, const float *c, float *v) {
                         for (int64_t j = 0; j < n; ++j)
                           v[j] = Float<S>::load(x[r * n + j]);
                         // The f32 product times gelu'(pre).
                         vecGeluTanhGrad(v, c, v, n);
                         for (int64_t j = 0; j < n; ++j)
                           o[r * n + j] = Float<S>::store(v[j]);
                       });
  }));
  // The bias gradient: dx's columns summed as bias_gelu_grad sums them.
  common::BiasSums b = common::biasSums(dx, dbias);
  return reduce(ReduceOp::Sum, dx, b.axes, b.sums);
}

Status matmulBiasGrad(const TensorRef &lhs, const TensorRef &rhs,
                      const TensorRef &out, const TensorRef &dbias) {
  SMP_RETURN_IF_ERROR(common::checkMatMulBiasGrad(lhs, rhs, out, dbias));
  SMP_RETURN_IF_ERROR(matmul(lhs, rhs, out, /*transposeLhs=*/true, false));
  common::BiasSums b = common::biasSums(lhs, dbias);
  return reduce(ReduceOp::Sum, lhs, b.axes, b.sums);
}

} // namespace smp::kernels::cpu
