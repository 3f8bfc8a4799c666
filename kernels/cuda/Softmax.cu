//===- Softmax.cu - softmax and log_softmax along one axis ----------------===//
//
// The input is viewed as [outer, n, inner]. inner == 1 (the usual last-axis
// case): one block per row, three passes over the row (max, sum of
// exp(x - max), output), each a block reduction. inner > 1: one thread per
// (outer, inner) column looping over n (adjacent threads read adjacent
// elements). The denominator accumulates in f32 (f64 for f64).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

template <class S>
__global__ void softmaxRows(const S *x, S *y, int64_t rows, int64_t n,
                            bool log) {
  using C = typename FT<S>::C;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const S *xr = x + r * n;
    S *yr = y + r * n;
    C m = -std::numeric_limits<C>::infinity();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      m = MaxOp{}(m, FT<S>::load(xr[i]));
    m = blockMax(m);
    C sum = C(0);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
      sum += dExp(FT<S>::load(xr[i]) - m);
    sum = blockSum(sum);
    if (log) {
      C ls = dLog(sum);
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        yr[i] = FT<S>::store((FT<S>::load(xr[i]) - m) - ls);
    } else {
      C inv = C(1) / sum;
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
        yr[i] = FT<S>::store(dExp(FT<S>::load(xr[i]) - m) * inv);
    }
  }
}

template <class S>
__global__ void softmaxColumns(const S *x, S *y, int64_t outer, int64_t n,
                               int64_t inner, bool log) {
  using C = typename FT<S>::C;
  SMP_GRID_STRIDE(t, outer * inner) {
    int64_t o = t / inner, j = t - o * inner;
    const S *xc = x + o * n * inner + j;
    S *yc = y + o * n * inner + j;
    C m = -std::numeric_limits<C>::infinity();
    for (int64_t i = 0; i < n; ++i)
      m = MaxOp{}(m, FT<S>::load(xc[i * inner]));
    C sum = C(0);
    for (int64_t i = 0; i < n; ++i)
      sum += dExp(FT<S>::load(xc[i * inner]) - m);
    C ls = dLog(sum), inv = C(1) / sum;
    for (int64_t i = 0; i < n; ++i) {
      C v = FT<S>::load(xc[i * inner]) - m;
      yc[i * inner] = FT<S>::store(log ? v - ls : dExp(v) * inv);
    }
  }
}

/// Rank 0: softmax 1, log_softmax 0 (NaN stays NaN).
template <class S> __global__ void softmaxScalar(const S *x, S *y, bool log) {
  using C = typename FT<S>::C;
  C v = FT<S>::load(*x);
  *y = FT<S>::store(isNaN(v) ? v : C(log ? 0 : 1));
}

} // namespace

Status softmax(const TensorRef &in, int64_t axis, const TensorRef &out,
               bool log) {
  const char *name = log ? "log_softmax" : "softmax";
  common::AxisSplit s;
  SMP_RETURN_IF_ERROR(common::checkSoftmax(name, in, axis, out, s));
  if (!smp::base::isFloat(in.dtype))
    return unsupported(name, in.dtype);
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  if (in.rank() == 0)
    return visitFloat(in.dtype, name, [&](auto tag) {
      using S = typename decltype(tag)::type;
      softmaxScalar<S><<<1, 1, 0, ctx->stream>>>(in.as<S>(), out.as<S>(), log);
      return launchStatus(name);
    });
  int64_t outer = s.outer, n = s.len, inner = s.inner;
  if (in.numel() == 0)
    return Status::success();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    if (inner == 1)
      softmaxRows<S><<<blocksFor(outer), rowThreads(n), 0, ctx->stream>>>(
          in.as<S>(), out.as<S>(), outer, n, log);
    else
      softmaxColumns<S><<<gridFor(outer * inner), kThreads, 0, ctx->stream>>>(
          in.as<S>(), out.as<S>(), outer, n, inner, log);
    return launchStatus(name);
  });
}

} // namespace smp::kernels::cuda
