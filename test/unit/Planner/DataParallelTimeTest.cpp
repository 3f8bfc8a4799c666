//===- DataParallelTimeTest.cpp - Collectives laid against compute --------===//
//
// exposedCommSeconds: what a communication stream adds to a sequence of
// compute ops (lib/Planner/DataParallelTime.h), on hand-made timelines.
//
//===----------------------------------------------------------------------===//

#include "DataParallelTime.h"

#include <gtest/gtest.h>

using smp::planning::CommTask;
using smp::planning::exposedCommSeconds;

namespace {

const std::vector<double> kThreeOps = {1.0, 1.0, 1.0};

TEST(DataParallelTime, NothingToCommunicateAddsNothing) {
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, {}), 0.0);
}

// A bucket released after op 0 and needed at the end hides behind ops 1 and
// 2 up to their 2 s; beyond that it shows.
TEST(DataParallelTime, ABucketHidesBehindTheOpsAfterIt) {
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, {{1, 3, 1.5}}), 0.0);
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, {{1, 3, 2.5}}), 0.5);
  // Released by the last op: all of it shows.
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, {{3, 3, 0.7}}), 0.7);
}

// A gather issued right before its op (release = need) is waited for whole;
// issued two ops ahead it runs beside them.
TEST(DataParallelTime, AGatherIsWaitedForByItsOp) {
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, {{2, 2, 0.5}}), 0.5);
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, {{0, 2, 1.5}}), 0.0);
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, {{0, 2, 2.5}}), 0.5);
}

// One stream: the second collective starts when the first ends, even if
// released earlier, so a long bucket delays the gather behind it.
TEST(DataParallelTime, CollectivesRunOneAtATime) {
  std::vector<CommTask> tasks = {{0, 3, 2.0}, {0, 1, 0.5}};
  // The gather ends at 2.5; op 1 waits from 1 to 2.5.
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, tasks), 1.5);
  // In the other order it ends at 0.5 and the bucket at 2.5, hidden.
  std::vector<CommTask> swapped = {{0, 1, 0.5}, {0, 3, 2.0}};
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, swapped), 0.0);
}

// A collective released by a late op starts then, not when the stream is
// free: released after op 1 (at 2 s), it ends at 3.5, half a second past
// the compute.
TEST(DataParallelTime, ACollectiveWaitsForItsRelease) {
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, {{2, 3, 1.5}}), 0.5);
  // Waiting ops delay the later releases too: the gather makes op 1 start
  // at 2, so the bucket released after it starts at 3 (not 2) and ends at
  // 4.5, half a second past the compute's 4.
  std::vector<CommTask> tasks = {{1, 1, 1.0}, {2, 3, 1.5}};
  EXPECT_DOUBLE_EQ(exposedCommSeconds(kThreeOps, tasks), 1.5);
}

} // namespace
