//===- DataParallelTime.h - Data parallelism's step time --------*- C++ -*-===//
//
// The time a candidate's data-parallel collectives (the gradients'
// all-reduce or reduce-scatter, ZeRO's parameter all-gathers, hybrid
// sharding's sum across the replica groups) add to its step. On a backend
// that runs collectives beside compute (DeviceSpec::overlapsCommunication)
// each stage's collectives are laid on one communication stream against
// that stage's ops as the compiled step orders them (buckets after the
// backward op that completes them, ZeRO-3's gathers prefetched), and only
// what outlasts the compute counts; elsewhere all of it does.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_PLANNER_DATAPARALLELTIME_H
#define SMP_LIB_PLANNER_DATAPARALLELTIME_H

#include "StagePartition.h"

#include <cstddef>
#include <vector>

namespace smp {
namespace planning {

/// A collective on the communication stream: it may start once compute
/// ops [0, release) are done and the collective before it has ended, and
/// compute op `need` (or, at the number of ops, the end) waits for it.
struct CommTask {
  size_t release = 0;
  size_t need = 0;
  double seconds = 0;
};

/// How much later the compute ops (seconds each, run in order) and the
/// tasks (run one at a time, in order) end than the ops alone.
double exposedCommSeconds(const std::vector<double> &ops,
                          const std::vector<CommTask> &tasks);

struct DataParallelTime {
  double total = 0;   // every collective's time, summed
  double exposed = 0; // what it adds to the step (the slowest stage's)
};

/// Candidate `c`'s data-parallel time with stages ending at `ends` (the
/// profile's last op of each) that recompute where `recompute` says.
/// `dpPerNode`: the data-parallel ranks of a node.
DataParallelTime dataParallelTime(const Stages &st, const PlanRequest &req,
                                  const Candidate &c,
                                  const std::vector<size_t> &ends,
                                  const std::vector<bool> &recompute,
                                  int64_t dpPerNode);

} // namespace planning
} // namespace smp

#endif // SMP_LIB_PLANNER_DATAPARALLELTIME_H
