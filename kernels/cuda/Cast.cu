//===- Cast.cu - Element type conversion between any two dtypes -----------===//
//
// As on the CPU, every source element is widened to double (floats), int64
// (signed ints, Bool) or uint64 (unsigned ints), then narrowed to the target
// type. Source and target dtypes are run-time switches in one kernel (the
// same for every thread) instead of 169 instantiations. add_multi's f32 sums
// of operands widened from 16 bits are here too.
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

/// An integer source element: kind 1 (int64) or 2 (uint64) by signedness.
template <class T> __device__ Wide widenInt(T v) {
  if constexpr (std::is_signed_v<T>)
    return Wide{1, 0.0, static_cast<int64_t>(v), 0};
  else
    return Wide{2, 0.0, 0, static_cast<uint64_t>(v)};
}

__device__ Wide widen(const void *p, DType t, int64_t i) {
  switch (t) {
  case DType::F32:
  case DType::F64:
  case DType::F16:
  case DType::BF16:
    return Wide{0, loadFloat(p, t, i), 0, 0};
  case DType::Bool:
    return Wide{1, 0.0, static_cast<const uint8_t *>(p)[i] != 0, 0};
#define SMP_WIDEN(D, T)                                                        \
  case DType::D:                                                               \
    return widenInt(static_cast<const T *>(p)[i]);
    SMP_INTEGER_DTYPES(SMP_WIDEN)
#undef SMP_WIDEN
  }
  return Wide{0, 0.0, 0, 0};
}

using common::floatToInt; // smp/kernels/common/Elements.h

/// w narrowed to storage type S (an integer or a float type).
template <class S> __device__ S narrowTo(const Wide &w) {
  if constexpr (std::is_integral_v<S>) {
    if (w.kind == 0)
      return floatToInt<S>(w.f);
    if (w.kind == 1)
      return static_cast<S>(w.s);
    return static_cast<S>(w.u);
  } else {
    using C = typename FT<S>::C;
    if (w.kind == 0)
      return FT<S>::store(static_cast<C>(w.f));
    if (w.kind == 1)
      return FT<S>::store(static_cast<C>(w.s));
    return FT<S>::store(static_cast<C>(w.u));
  }
}

__device__ void narrow(void *p, DType t, int64_t i, const Wide &w) {
  switch (t) {
  case DType::Bool:
    static_cast<uint8_t *>(p)[i] = static_cast<uint8_t>(
        w.kind == 0 ? w.f != 0.0 : w.kind == 1 ? w.s != 0 : w.u != 0);
    break;
#define SMP_NARROW(D, S)                                                       \
  case DType::D:                                                               \
    static_cast<S *>(p)[i] = narrowTo<S>(w);                                   \
    break;
    SMP_NARROW(F32, float)
    SMP_NARROW(F64, double)
    SMP_NARROW(F16, __half)
    SMP_NARROW(BF16, __nv_bfloat16)
    SMP_INTEGER_DTYPES(SMP_NARROW)
#undef SMP_NARROW
  }
}

__global__ void castKernel(const void *in, DType from, void *out, DType to,
                           int64_t n) {
  SMP_GRID_STRIDE(i, n) { narrow(out, to, i, widen(in, from, i)); }
}

/// One tensor of a cast_multi.
struct CastDesc {
  const void *in;
  DType from;
  void *out;
  DType to;
  int64_t n;
};

/// Block b casts its chunk of its tensor (Common.cuh's multi-tensor launch).
__global__ void castMultiKernel(const CastDesc *tensors,
                                const int64_t *firstBlock, int64_t count) {
  MultiChunk c = multiChunk(firstBlock, count);
  const CastDesc &t = tensors[c.tensor];
  int64_t end = c.begin + kMultiChunk < t.n ? c.begin + kMultiChunk : t.n;
  for (int64_t i = c.begin + threadIdx.x; i < end; i += blockDim.x)
    narrow(t.out, t.to, i, widen(t.in, t.from, i));
}

/// One pair of an add_multi: out = f32(lhs) + f32(rhs).
struct AddPair {
  const void *lhs;
  DType lhsType;
  const void *rhs;
  DType rhsType;
  float *out;
  int64_t n;
};

/// Block b sums its chunk of its pair (each element read before it is
/// written: out may be lhs or rhs).
__global__ void addMultiKernel(const AddPair *pairs, const int64_t *firstBlock,
                               int64_t count) {
  MultiChunk c = multiChunk(firstBlock, count);
  const AddPair &t = pairs[c.tensor];
  int64_t end = c.begin + kMultiChunk < t.n ? c.begin + kMultiChunk : t.n;
  for (int64_t i = c.begin + threadIdx.x; i < end; i += blockDim.x)
    t.out[i] = static_cast<float>(loadFloat(t.lhs, t.lhsType, i)) +
               static_cast<float>(loadFloat(t.rhs, t.rhsType, i));
}

} // namespace

Status addMulti(const std::vector<TensorRef> &lhs,
                const std::vector<TensorRef> &rhs,
                const std::vector<TensorRef> &out) {
  const char *name = "add_multi";
  SMP_RETURN_IF_ERROR(common::checkAddMulti(lhs, rhs, out));
  std::vector<AddPair> pairs;
  MultiTensorPlan plan;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t n = out[i].numel();
    if (n == 0)
      continue;
    pairs.push_back(AddPair{lhs[i].data, lhs[i].dtype, rhs[i].data,
                            rhs[i].dtype, static_cast<float *>(out[i].data),
                            n});
    plan.add(n);
  }
  return launchMulti(name, pairs, plan, addMultiKernel);
}

Status castMulti(const std::vector<TensorRef> &in,
                 const std::vector<TensorRef> &out) {
  const char *name = "cast_multi";
  SMP_RETURN_IF_ERROR(common::checkCastMulti(in, out));
  std::vector<CastDesc> descs;
  MultiTensorPlan plan;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t n = in[i].numel();
    if (n == 0)
      continue;
    descs.push_back(
        CastDesc{in[i].data, in[i].dtype, out[i].data, out[i].dtype, n});
    plan.add(n);
  }
  return launchMulti(name, descs, plan, castMultiKernel);
}

Status cast(const TensorRef &in, const TensorRef &out) {
  const char *name = "cast";
  SMP_RETURN_IF_ERROR(common::checkCast(in, out));
  if (in.dtype == out.dtype)
    return copy(in, out);
  int64_t n = in.numel();
  return launch(name, n, castKernel, in.data, in.dtype, out.data, out.dtype, n);
}

} // namespace smp::kernels::cuda
