//===- MemoryPlanTest.cpp - Arena planning --------------------------------===//

#include "smp/Target/Artifact/MemoryPlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

using namespace smp;

namespace {

/// No two ranges that are live at the same time may overlap in memory.
void expectNoOverlap(const std::vector<LiveRange> &ranges,
                     const MemoryPlan &plan, uint64_t alignment) {
  for (size_t a = 0; a < ranges.size(); ++a) {
    EXPECT_EQ(plan.offsets[a] % alignment, 0u);
    EXPECT_LE(plan.offsets[a] + ranges[a].bytes, plan.arenaBytes);
    for (size_t b = a + 1; b < ranges.size(); ++b) {
      bool liveTogether = ranges[a].start <= ranges[b].end &&
                          ranges[b].start <= ranges[a].end;
      bool overlap = plan.offsets[a] < plan.offsets[b] + ranges[b].bytes &&
                     plan.offsets[b] < plan.offsets[a] + ranges[a].bytes;
      EXPECT_FALSE(liveTogether && overlap) << "ranges " << a << " and " << b;
    }
  }
}

TEST(MemoryPlan, ReusesMemoryOfDeadBuffers) {
  // A chain a -> b -> c -> d: each value dies when the next is made, so two
  // slots suffice.
  std::vector<LiveRange> chain = {
      {0, 1, 1000}, {1, 2, 1000}, {2, 3, 1000}, {3, 4, 1000}};
  MemoryPlan plan = planMemory(chain, 64);
  expectNoOverlap(chain, plan, 64);
  EXPECT_EQ(plan.arenaBytes, 2 * 1024u);
  EXPECT_EQ(plan.offsets[0], plan.offsets[2]);
}

TEST(MemoryPlan, PersistentBuffersNeverShare) {
  std::vector<LiveRange> ranges = {{-1, INT64_MAX, 4096},
                                   {-1, INT64_MAX, 100},
                                   {0, 0, 4096},
                                   {1, 1, 4096}};
  MemoryPlan plan = planMemory(ranges, 64);
  expectNoOverlap(ranges, plan, 64);
  EXPECT_EQ(plan.arenaBytes, 4096u + 128u + 4096u);
}

TEST(MemoryPlan, RandomRangesNeverOverlap) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<LiveRange> ranges;
    uint64_t peakBound = 0;
    for (int i = 0; i < 60; ++i) {
      int64_t start = rng() % 40;
      int64_t end = start + rng() % 10;
      uint64_t bytes = 1 + rng() % 5000;
      ranges.push_back({start, end, bytes});
      peakBound += (bytes + 63) / 64 * 64;
    }
    MemoryPlan plan = planMemory(ranges, 64);
    expectNoOverlap(ranges, plan, 64);
    EXPECT_LE(plan.arenaBytes, peakBound);
    // The most bytes live at once bounds every layout from below.
    EXPECT_LE(plan.peakLiveBytes, plan.arenaBytes);
    EXPECT_GT(plan.peakLiveBytes, 0u);
  }
}

TEST(MemoryPlan, LargestFirstWhenProgramOrderFragments) {
  // In program order, a small buffer lands at 0, a large one above it, and
  // a second large one (live with the small one only) cannot reuse the
  // first's space below the small one: 3 slots. Largest first packs both
  // large buffers at 0 and the small one above: 2 slots, the lower bound.
  std::vector<LiveRange> ranges = {
      {0, 1, 1024},   // small, live with both large ones
      {1, 1, 4096},   // large
      {0, 0, 4096}};  // large, before the other
  MemoryPlan plan = planMemory(ranges, 64);
  expectNoOverlap(ranges, plan, 64);
  EXPECT_EQ(plan.peakLiveBytes, 4096u + 1024u);
  EXPECT_EQ(plan.arenaBytes, plan.peakLiveBytes);
}

TEST(MemoryPlan, PeakLiveCountsPersistentBuffers) {
  std::vector<LiveRange> ranges = {{-1, INT64_MAX, 4096}, {0, 3, 1024},
                                   {2, 5, 1024}, {4, 4, 512}};
  MemoryPlan plan = planMemory(ranges, 64);
  expectNoOverlap(ranges, plan, 64);
  EXPECT_EQ(plan.peakLiveBytes, 4096u + 2048u);
  EXPECT_EQ(plan.arenaBytes, plan.peakLiveBytes);
}

} // namespace

/// Ranges shaped like a training step: a forward that saves activations for
/// the backward (nested lives), short temporaries between them and
/// gradients that live from their backward op to the end. Over many random
/// steps the layouts stay within 2% of the lower bound on average (first
/// fit and greedy by size alone leave 3.5% here; the breadth order and
/// the iterated rounds close most of it).
TEST(MemoryPlan, TrainingStepsNearTheLowerBound) {
  std::mt19937 rng(7);
  double overhead = 0;
  constexpr int kTrials = 40;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<LiveRange> ranges;
    int layers = 8 + rng() % 8;
    int64_t last = 4 * layers;
    for (int l = 0; l < layers; ++l) {
      int64_t f = 2 * l, b = last - 2 * l;
      ranges.push_back({f, b, 64 * (1 + rng() % 256)});      // saved
      ranges.push_back({f, f + 1, 64 * (1 + rng() % 512)});  // temporary
      ranges.push_back({b - 1, b, 64 * (1 + rng() % 512)});  // temporary
      ranges.push_back({b, INT64_MAX, 64 * (1 + rng() % 64)}); // gradient
    }
    MemoryPlan plan = planMemory(ranges, 64);
    expectNoOverlap(ranges, plan, 64);
    overhead += double(plan.arenaBytes) / double(plan.peakLiveBytes) - 1;
  }
  EXPECT_LT(overhead / kTrials, 0.02); // 1.1% (3.5% before)
}

/// Many buffers that live long (a training step's gradients, live from
/// their backward op to the end) beside a chain of short temporaries and
/// thousands of parameters: the plan is valid (checked by a sweep, the
/// pairwise check would be quadratic) and the parameters are stacked
/// below everything else.
TEST(MemoryPlan, ManyLongLivedRanges) {
  std::vector<LiveRange> ranges;
  constexpr int kParams = 2000, kSteps = 8000;
  for (int i = 0; i < kParams; ++i)
    ranges.push_back({-1, INT64_MAX, 64 * uint64_t(1 + i % 7)});
  for (int t = 0; t < kSteps; ++t) {
    ranges.push_back({t, t + 1, 64 * uint64_t(1 + t % 5)});
    if (t >= kSteps / 2 && t % 2 == 0)
      ranges.push_back({t, INT64_MAX, 64 * uint64_t(1 + t % 3)});
  }
  MemoryPlan plan = planMemory(ranges, 64);
  uint64_t params = 0;
  for (int i = 0; i < kParams; ++i)
    params += ranges[i].bytes;
  for (int i = 0; i < kParams; ++i)
    EXPECT_LT(plan.offsets[i], params);
  for (size_t i = kParams; i < ranges.size(); ++i)
    EXPECT_GE(plan.offsets[i], params);
  // Sweep over instants: the blocks live at each instant are disjoint.
  struct Event {
    int64_t time;
    bool open;
    size_t idx;
  };
  std::vector<Event> events;
  for (size_t i = 0; i < ranges.size(); ++i) {
    events.push_back({ranges[i].start, true, i});
    if (ranges[i].end != INT64_MAX)
      events.push_back({ranges[i].end + 1, false, i});
  }
  std::sort(events.begin(), events.end(), [](const Event &a, const Event &b) {
    return a.time != b.time ? a.time < b.time : a.open < b.open;
  });
  std::map<uint64_t, uint64_t> live; // offset -> end
  for (const Event &e : events) {
    uint64_t off = plan.offsets[e.idx], end = off + ranges[e.idx].bytes;
    if (!e.open) {
      live.erase(off);
      continue;
    }
    auto next = live.lower_bound(off);
    if (next != live.end())
      ASSERT_LE(end, next->first) << "range " << e.idx;
    if (next != live.begin())
      ASSERT_LE(std::prev(next)->second, off) << "range " << e.idx;
    live[off] = end;
    ASSERT_LE(end, plan.arenaBytes);
  }
  EXPECT_LE(plan.peakLiveBytes, plan.arenaBytes);
}
