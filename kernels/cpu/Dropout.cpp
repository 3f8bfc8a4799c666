//===- Dropout.cpp - smp.dropout's kernel (mask: common/Dropout.h)
//---------===//

#include "Common.h"

#include "smp/kernels/common/Dropout.h"

namespace smp::kernels::cpu {
using namespace detail;

Status dropout(const TensorRef &in, const DropoutKey &key,
               const TensorRef &out) {
  common::DropoutPlan plan;
  SMP_RETURN_IF_ERROR(common::planDropout(key, in, out, plan));
  int64_t n = in.numel();
  return visitFloat(in.dtype, "dropout", [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = typename Float<S>::C;
    const S *x = in.as<S>();
    S *y = out.as<S>();
    C scale = static_cast<C>(plan.scale);
    // Each element draws its own word (no sum): any split of the loop
    // gives the same bits.
    parallelFor(n, grainFor(32), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        y[i] = Float<S>::store(common::dropoutKeeps(plan, i)
                                   ? Float<S>::load(x[i]) * scale
                                   : C(0));
    });
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
