//===- DropoutChecks.cpp - dropout's arguments and key -------------------===//

#include "smp/kernels/common/Dropout.h"
#include "smp/kernels/common/OpChecks.h"

#include <cmath>
#include <string>

namespace smp::kernels::common {

namespace {

Status badKey(const std::string &why) {
  return Status::failure("dropout: " + why);
}

} // namespace

Status planDropout(const smp::kernels::DropoutKey &key, const TensorRef &in,
                   const TensorRef &out, DropoutPlan &plan) {
  SMP_RETURN_IF_ERROR(checkSameTensor("dropout", in, out));
  if (!smp::base::isFloat(in.dtype))
    return unsupported("dropout", in.dtype);
  return planDropoutOver(key, in.shape, plan);
}

Status planDropoutOver(const smp::kernels::DropoutKey &key,
                       const std::vector<int64_t> &shape, DropoutPlan &plan) {
  if (!(key.ratio >= 0 && key.ratio <= 1))
    return badKey("ratio " + std::to_string(key.ratio) + " is not in [0, 1]");
  plan = DropoutPlan();
  plan.key[0] = static_cast<uint32_t>(key.seed);
  plan.key[1] = static_cast<uint32_t>(key.seed >> 32);
  plan.stream = static_cast<uint32_t>(key.stream);
  plan.step = static_cast<uint32_t>(key.step);
  plan.stepAt = key.stepOnDevice;
  plan.dropAll = key.ratio >= 1;
  // keep when the word >= p 2^32 (rounded): P(keep) = 1 - p to 2^-32.
  plan.threshold = static_cast<uint32_t>(
      std::fmin(std::nearbyint(key.ratio * 4294967296.0), 4294967295.0));
  plan.scale =
      plan.dropAll ? 0.0f : static_cast<float>(1.0 / (1.0 - key.ratio));
  int64_t numel = 1;
  for (int64_t d : shape)
    numel *= d;
  int64_t global = numel, rank = static_cast<int64_t>(shape.size());
  if (key.tpDim >= 0 && key.tpParts > 1) {
    if (key.tpDim >= rank)
      return badKey("its tensor-parallel dim " + std::to_string(key.tpDim) +
                    " is not a dim of a rank-" + std::to_string(rank) +
                    " tensor");
    int64_t d = shape[key.tpDim];
    if (key.tpBlocks < 1 || d % key.tpBlocks != 0 || key.tpIndex < 0 ||
        key.tpIndex >= key.tpParts)
      return badKey("part " + std::to_string(key.tpIndex) + " of " +
                    std::to_string(key.tpParts) + " in " +
                    std::to_string(key.tpBlocks) +
                    " blocks does not split "
                    "its dim of " +
                    std::to_string(d));
    plan.split = true;
    plan.d = d;
    plan.blockSize = d / key.tpBlocks;
    plan.parts = key.tpParts;
    plan.index = key.tpIndex;
    for (int64_t k = key.tpDim + 1; k < rank; ++k)
      plan.inner *= shape[k];
    global = numel * key.tpParts;
  }
  if (key.samples > 0) {
    if (global % key.samples != 0 || key.sampleOffset < 0)
      return badKey(std::to_string(key.samples) + " samples do not split " +
                    "its " + std::to_string(global) + " elements");
    plan.base = key.sampleOffset * (global / key.samples);
  }
  return Status::success();
}

Status planAttentionDropout(const char *op, const smp::kernels::DropoutKey &key,
                            const AttentionDims &g, DropoutPlan &plan) {
  if (key.tpParts > 1 && key.tpDim == 3)
    return Status::failure(std::string(op) +
                           ": its dropout's key splits the keys' dim (3) of "
                           "the probabilities; only the batch and the heads "
                           "may be split");
  Status st = planDropoutOver(key, {g.b, g.hq, g.s, g.sk}, plan);
  if (!st.ok())
    return Status::failure(std::string(op) + ": " + st.error);
  return Status::success();
}

} // namespace smp::kernels::common
