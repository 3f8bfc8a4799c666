//===- PipelineCosts.cpp - A candidate's pipeline, simulated --------------===//

#include "PipelineCosts.h"

#include <map>
#include <tuple>

namespace smp {
namespace planning {

schedule::Costs pipelineCosts(const std::vector<double> &stageSeconds,
                              bool recompute, int64_t virtualStages,
                              double messageSeconds) {
  schedule::Costs c;
  c.forward = 1;
  c.backward = recompute ? 3 : 2;
  c.backwardInput = recompute ? 2 : 1;
  c.backwardWeight = 1;
  c.communication = messageSeconds;
  const size_t p = stageSeconds.size();
  const double perForward = recompute ? 4 : 3;
  c.stageScale.resize(p * virtualStages);
  // Chunk k of rank r is stage k p + r.
  for (size_t s = 0; s < c.stageScale.size(); ++s)
    c.stageScale[s] = stageSeconds[s % p] / virtualStages / perForward;
  return c;
}

namespace {

/// The schedules this thread built (a search prices many candidates of one
/// shape); valid until the next call.
const schedule::Schedule &cachedSchedule(schedule::ScheduleKind kind, int p,
                                         int m, int v) {
  thread_local std::map<std::tuple<int, int, int, int>, schedule::Schedule>
      cache;
  auto key = std::make_tuple(static_cast<int>(kind), p, m, v);
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() > 256)
      cache.clear();
    it = cache.emplace(key, schedule::buildSchedule(kind, p, m, v)).first;
  }
  return it->second;
}

} // namespace

double pipelineSeconds(schedule::ScheduleKind kind, int64_t m,
                       const std::vector<double> &stageSeconds, bool recompute,
                       int64_t virtualStages, double messageSeconds,
                       double *bubble) {
  int p = static_cast<int>(stageSeconds.size());
  int v = static_cast<int>(virtualStages), mb = static_cast<int>(m);
  const schedule::Schedule &order = cachedSchedule(kind, p, mb, v);
  if (order.empty())
    return -1;
  return schedule::simulatedMakespan(
      order, p, mb, v,
      pipelineCosts(stageSeconds, recompute, virtualStages, messageSeconds),
      bubble);
}

} // namespace planning
} // namespace smp
