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
    // Each element's word is a function of its global index (no sum): any
    // split of the loop gives the same bits. Consecutive global indices
    // share a draw of four words: one Philox call per four elements.
    parallelFor(n, grainFor(16), [&](int64_t i0, int64_t i1) {
      uint64_t drawn = UINT64_MAX;
      uint32_t words[4] = {0, 0, 0, 0};
      for (int64_t i = i0; i < i1; ++i) {
        uint64_t g = static_cast<uint64_t>(common::dropoutGlobalIndex(plan, i));
        if (g >> 2 != drawn) {
          common::dropoutWords(plan, g, words);
          drawn = g >> 2;
        }
        bool keep = !plan.dropAll && words[g & 3] >= plan.threshold;
        y[i] = Float<S>::store(keep ? Float<S>::load(x[i]) * scale : C(0));
      }
    });
    return Status::success();
  });
}

} // namespace smp::kernels::cpu
