//===- PipelineCostsTest.cpp - A candidate's pipeline, simulated ----------===//
//
// pipelineSeconds (lib/Planner/PipelineCosts.h): the schedule simulated
// with each stage's own time, against hand-made timelines.
//
//===----------------------------------------------------------------------===//

#include "PipelineCosts.h"

#include <gtest/gtest.h>

using smp::planning::pipelineCosts;
using smp::planning::pipelineSeconds;
using smp::schedule::ScheduleKind;

namespace {

// Equal stages: m (F + B) / (1 - bubble), the closed form.
TEST(PipelineCosts, EqualStagesGiveTheClosedForm) {
  double bubble = -1;
  double t = pipelineSeconds(ScheduleKind::OneFOneB, 8, {3, 3, 3, 3}, false, 1,
                             0, &bubble);
  EXPECT_DOUBLE_EQ(bubble, 3.0 / 11);
  EXPECT_DOUBLE_EQ(t, 8 * 3 / (1 - 3.0 / 11));
}

// 1F1B, 2 stages of 3 s and 9 s (F + B of a micro-batch), 4 micro-batches:
// stage 1 runs its 4 x 9 s from stage 0's first forward (1 s) on, then
// stage 0 its last backward (2 s): 39 s, where the slowest stage priced as
// every stage gives 4 x 9 / (1 - 1/5) = 45.
TEST(PipelineCosts, UnequalStagesCostWhatTheyDo) {
  double bubble = -1;
  double t =
      pipelineSeconds(ScheduleKind::OneFOneB, 4, {3, 9}, false, 1, 0, &bubble);
  EXPECT_DOUBLE_EQ(t, 1 + 4 * 9 + 2);
  EXPECT_DOUBLE_EQ(bubble, 1 - (4 * 3 + 4 * 9) / (2 * 39.0));
  // Each message on the way: 0.5 s to stage 1 and 0.5 s back.
  EXPECT_DOUBLE_EQ(pipelineSeconds(ScheduleKind::OneFOneB, 4, {3, 9}, false, 1,
                                   0.5, &bubble),
                   1 + 0.5 + 4 * 9 + 0.5 + 2);
}

// Recomputing: a forward is a quarter of a stage's time, the backward the
// other three (the forward again, then the gradients).
TEST(PipelineCosts, RecomputationMakesTheBackwardThreeForwards) {
  smp::schedule::Costs c = pipelineCosts({4, 8}, true, 1, 0);
  EXPECT_DOUBLE_EQ(c.of({smp::schedule::Action::F, 0, 0}), 1);
  EXPECT_DOUBLE_EQ(c.of({smp::schedule::Action::B, 1, 0}), 6);
  EXPECT_DOUBLE_EQ(c.of({smp::schedule::Action::BI, 1, 0}), 4);
  EXPECT_DOUBLE_EQ(c.of({smp::schedule::Action::BW, 1, 0}), 2);
  // With v chunks a rank, each chunk is 1/v of its rank's time: chunk 1 of
  // rank 0 is stage 2 of 4.
  smp::schedule::Costs v = pipelineCosts({6, 12}, false, 2, 0);
  ASSERT_EQ(v.stageScale.size(), 4u);
  EXPECT_DOUBLE_EQ(v.of({smp::schedule::Action::F, 2, 0}), 1);
  EXPECT_DOUBLE_EQ(v.of({smp::schedule::Action::B, 3, 0}), 4);
}

TEST(PipelineCosts, NoScheduleIsANegativeTime) {
  double bubble = 0;
  // No micro-batches: buildSchedule makes no schedule.
  EXPECT_LT(
      pipelineSeconds(ScheduleKind::OneFOneB, 0, {1, 1}, false, 1, 0, &bubble),
      0);
}

} // namespace
