//===- Dropout.cu - smp.dropout's kernel (mask: common/Dropout.h)
//----------===//
//
// One thread per element, as the CPU kernel: the mask is a function of the
// element's global index, so both draw the same words.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

#include "smp/kernels/common/Dropout.h"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

template <class S>
__global__ void dropoutKernel(const S *x, S *y, int64_t n,
                              common::DropoutPlan plan) {
  using C = typename FT<S>::C;
  C scale = static_cast<C>(plan.scale);
  SMP_GRID_STRIDE(i, n) {
    y[i] = FT<S>::store(
        common::dropoutKeeps(plan, i) ? FT<S>::load(x[i]) * scale : C(0));
  }
}

} // namespace

Status dropout(const TensorRef &in, const DropoutKey &key,
               const TensorRef &out) {
  const char *name = "dropout";
  common::DropoutPlan plan;
  SMP_RETURN_IF_ERROR(common::planDropout(key, in, out, plan));
  int64_t n = in.numel();
  return visitFloat(in.dtype, name, [&](auto tag) {
    using S = typename decltype(tag)::type;
    return launch(name, n, dropoutKernel<S>, in.as<S>(), out.as<S>(), n, plan);
  });
}

} // namespace smp::kernels::cuda
