//===- PipelineCosts.h - A candidate's pipeline, simulated --*- C++ -*-===//
//
// A pipeline candidate's time from the schedule simulator with each
// stage's own time (StagePartition's forward + backward of a micro-batch),
// so that unequal stages cost what they do: the slowest stage bounds the
// steady state, the others only the fill and drain. The planner prices
// candidates with it and plan reports draw the same simulation.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_PLANNER_PIPELINECOSTS_H
#define SMP_LIB_PLANNER_PIPELINECOSTS_H

#include "smp/Schedule/PipelineSchedule.h"

#include <cstdint>
#include <vector>

namespace smp {
namespace planning {

/// The simulator's costs for ranks whose stages take `stageSeconds` each
/// (forward + backward of one micro-batch; with recomputation, of the
/// forward run again too) and send each message in `messageSeconds`: a
/// forward a third of a stage's time (a quarter when recomputing, the
/// backward then 3 forwards), a backward's input and weight halves (ZB-H1)
/// a forward each (the input half 2 when recomputing); with v chunks a
/// rank, each chunk 1/v of its rank's time. `recompute` is whether the
/// stages recompute (the ratio is the plan's: any stage recomputing).
schedule::Costs pipelineCosts(const std::vector<double> &stageSeconds,
                              bool recompute, int64_t virtualStages,
                              double messageSeconds);

/// The step's pipeline time of `kind` on the stages above with m micro-
/// batches: the simulated makespan, and its bubble into *bubble. Returns a
/// negative time for a schedule that cannot run (invalid parameters).
double pipelineSeconds(schedule::ScheduleKind kind, int64_t m,
                       const std::vector<double> &stageSeconds, bool recompute,
                       int64_t virtualStages, double messageSeconds,
                       double *bubble);

} // namespace planning
} // namespace smp

#endif // SMP_LIB_PLANNER_PIPELINECOSTS_H
