//===- Cast.cu - Element type conversion between any two dtypes -----------===//
//
// As on the CPU, every source element is widened to double (floats), int64
// (signed ints, Bool) or uint64 (unsigned ints), then narrowed to the target
// type. Source and target dtypes are run-time switches in one kernel (the
// same for every thread) instead of 169 instantiations.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "smp/kernels/common/Elements.h"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

struct Wide {
  int kind; // 0: f, 1: s, 2: u
  double f;
  int64_t s;
  uint64_t u;
};

__device__ Wide widen(const void *p, DType t, int64_t i) {
  Wide w{0, 0.0, 0, 0};
  switch (t) {
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16:
    w.kind = 0;
    w.f = loadFloat(p, t, i);
    break;
  case DType::Bool:
    w.kind = 1;
    w.s = static_cast<const uint8_t *>(p)[i] != 0;
    break;
  case DType::I8:
  case DType::I16:
  case DType::I32:
  case DType::I64:
    w.kind = 1;
    w.s = loadIndex(p, t, i);
    break;
  case DType::U8:
    w.kind = 2;
    w.u = static_cast<const uint8_t *>(p)[i];
    break;
  case DType::U16:
    w.kind = 2;
    w.u = static_cast<const uint16_t *>(p)[i];
    break;
  case DType::U32:
    w.kind = 2;
    w.u = static_cast<const uint32_t *>(p)[i];
    break;
  case DType::U64:
    w.kind = 2;
    w.u = static_cast<const uint64_t *>(p)[i];
    break;
  }
  return w;
}

using common::floatToInt; // smp/kernels/common/Elements.h

template <class T> __device__ T narrowInt(const Wide &w) {
  if (w.kind == 0)
    return floatToInt<T>(w.f);
  if (w.kind == 1)
    return static_cast<T>(w.s);
  return static_cast<T>(w.u);
}

template <class C> __device__ C narrowFloat(const Wide &w) {
  if (w.kind == 0)
    return static_cast<C>(w.f);
  if (w.kind == 1)
    return static_cast<C>(w.s);
  return static_cast<C>(w.u);
}

__device__ void narrow(void *p, DType t, int64_t i, const Wide &w) {
  switch (t) {
  case DType::F32:
    static_cast<float *>(p)[i] = narrowFloat<float>(w);
    break;
  case DType::F64:
    static_cast<double *>(p)[i] = narrowFloat<double>(w);
    break;
  case DType::F16:
    static_cast<__half *>(p)[i] = __float2half_rn(narrowFloat<float>(w));
    break;
  case DType::BF16:
    static_cast<__nv_bfloat16 *>(p)[i] =
        __float2bfloat16_rn(narrowFloat<float>(w));
    break;
  case DType::Bool:
    static_cast<uint8_t *>(p)[i] = static_cast<uint8_t>(
        w.kind == 0 ? w.f != 0.0 : w.kind == 1 ? w.s != 0 : w.u != 0);
    break;
  case DType::I8:
    static_cast<int8_t *>(p)[i] = narrowInt<int8_t>(w);
    break;
  case DType::I16:
    static_cast<int16_t *>(p)[i] = narrowInt<int16_t>(w);
    break;
  case DType::I32:
    static_cast<int32_t *>(p)[i] = narrowInt<int32_t>(w);
    break;
  case DType::I64:
    static_cast<int64_t *>(p)[i] = narrowInt<int64_t>(w);
    break;
  case DType::U8:
    static_cast<uint8_t *>(p)[i] = narrowInt<uint8_t>(w);
    break;
  case DType::U16:
    static_cast<uint16_t *>(p)[i] = narrowInt<uint16_t>(w);
    break;
  case DType::U32:
    static_cast<uint32_t *>(p)[i] = narrowInt<uint32_t>(w);
    break;
  case DType::U64:
    static_cast<uint64_t *>(p)[i] = narrowInt<uint64_t>(w);
    break;
  }
}

__global__ void castKernel(const void *in, DType from, void *out, DType to,
                           int64_t n) {
  SMP_GRID_STRIDE(i, n) { narrow(out, to, i, widen(in, from, i)); }
}

} // namespace

Status cast(const TensorRef &in, const TensorRef &out) {
  const char *name = "cast";
  SMP_RETURN_IF_ERROR(common::checkCast(in, out));
  if (in.dtype == out.dtype)
    return copy(in, out);
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(name, ctx));
  int64_t n = in.numel();
  if (n == 0)
    return Status::success();
  castKernel<<<gridFor(n), kThreads, 0, ctx->stream>>>(in.data, in.dtype,
                                                       out.data, out.dtype, n);
  return launchStatus(name);
}

} // namespace smp::kernels::cuda
