//===- PlannerInternal.h - Shared by the planner's files -------*- C++ -*-===//

#ifndef SMP_LIB_PLANNER_PLANNERINTERNAL_H
#define SMP_LIB_PLANNER_PLANNERINTERNAL_H

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <string>
#include <vector>

namespace smp {

struct ModelProfile;
struct Plan;
struct PlanRequest;

/// Whether ZeRO `stage` keeps no whole gradient: each is reduce-scattered
/// in its bucket as the backward makes it and only this rank's chunk stays.
/// ZeRO-2 and 3 always; ZeRO-1 (smp-shard-optimizer-state) with one
/// micro-batch, where its buckets of whole gradients are those parts (with
/// several, the sums over the micro-batches are kept whole until the last
/// backward scatters them).
inline bool scattersGradients(int stage, int64_t microbatches) {
  return stage >= 2 || (stage == 1 && microbatches == 1);
}

/// Optimizer state per parameter byte: 0 (SGD), 1 (momentum), 2 (Adam).
inline double optimizerStateFactor(const std::string &optimizer) {
  if (optimizer == "sgd")
    return 0;
  if (optimizer == "sgd-momentum")
    return 1;
  return 2; // adam, adamw: exp_avg and exp_avg_sq
}

/// Replaces `p`'s stage memory by the liveness of each stage's step
/// (MemorySweep.cpp); returns whether it swept.
bool sweepMemory(Plan &p, const ModelProfile &profile, const PlanRequest &req);

/// "70.6 GB", "12.0 MB", "3.4 KB" (one decimal), for plan text and errors.
std::string formatBytes(double bytes);

/// The largest of any range of `values` in O(1), after O(n log n) set-up (a
/// sparse table: level k holds the largest of 2^k values from each i).
class RangeMax {
public:
  RangeMax() = default;
  explicit RangeMax(const std::vector<double> &values) : levels{values} {
    for (size_t w = 1; 2 * w <= values.size(); w *= 2) {
      const std::vector<double> &prev = levels.back();
      std::vector<double> next(values.size() - 2 * w + 1);
      for (size_t i = 0; i < next.size(); ++i)
        next[i] = std::max(prev[i], prev[i + w]);
      levels.push_back(std::move(next));
    }
  }
  /// The largest of values [begin, end), end > begin.
  double max(size_t begin, size_t end) const {
    size_t k = llvm::Log2_64(end - begin), w = size_t(1) << k;
    return std::max(levels[k][begin], levels[k][end - w]);
  }

private:
  std::vector<std::vector<double>> levels;
};

} // namespace smp

#endif // SMP_LIB_PLANNER_PLANNERINTERNAL_H
