//===- PlannerInternal.h - Shared by the planner's files -------*- C++ -*-===//

#ifndef SMP_LIB_PLANNER_PLANNERINTERNAL_H
#define SMP_LIB_PLANNER_PLANNERINTERNAL_H

#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <string>
#include <vector>

namespace smp {

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
