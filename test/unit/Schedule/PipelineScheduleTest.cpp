//===- PipelineScheduleTest.cpp - schedules and the simulator -------------===//

#include "smp/Schedule/PipelineSchedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

using namespace smp::schedule;

namespace smp::schedule {
// Names in gtest's output for the parameterized tests.
void PrintTo(ScheduleKind kind, std::ostream *os) { *os << scheduleKindName(kind); }
} // namespace smp::schedule

namespace {

constexpr double kEps = 1e-12;

Action F(int s, int mb) { return {Action::F, s, mb}; }
Action B(int s, int mb) { return {Action::B, s, mb}; }
Action BI(int s, int mb) { return {Action::BI, s, mb}; }
Action BW(int s, int mb) { return {Action::BW, s, mb}; }

std::string str(const std::vector<Action> &list) {
  std::string out;
  for (const Action &a : list)
    out += (out.empty() ? "" : " ") + toString(a);
  return out;
}

Schedule build(ScheduleKind kind, int p, int m, int v = 1) {
  std::string error;
  Schedule s = buildSchedule(kind, p, m, v, &error);
  EXPECT_EQ(error, "") << scheduleKindName(kind) << " p=" << p << " m=" << m
                       << " v=" << v;
  return s;
}

SimulationResult run(ScheduleKind kind, int p, int m, int v = 1,
                     const Costs &costs = Costs()) {
  return simulateSchedule(build(kind, p, m, v), p, m, v, costs);
}

double oneFOneBBubble(int p, int m) { return double(p - 1) / (m + p - 1); }

// The largest micro-batch group of the interleaved schedule.
int largestGroup(int p, int m) {
  int groups = std::max(1, m / p);
  return m / groups + (m % groups ? 1 : 0);
}

//===----------------------------------------------------------------------===//
// Names and parameters
//===----------------------------------------------------------------------===//

TEST(ScheduleKindTest, ParsesNamesAndRoundTrips) {
  EXPECT_EQ(parseScheduleKind("gpipe"), ScheduleKind::GPipe);
  EXPECT_EQ(parseScheduleKind("1F1B"), ScheduleKind::OneFOneB);
  EXPECT_EQ(parseScheduleKind("interleaved"), ScheduleKind::Interleaved);
  EXPECT_EQ(parseScheduleKind("interleaved-1f1b"), ScheduleKind::Interleaved);
  EXPECT_EQ(parseScheduleKind("zb-h1"), ScheduleKind::ZeroBubbleH1);
  EXPECT_EQ(parseScheduleKind("ZBH1"), ScheduleKind::ZeroBubbleH1);
  EXPECT_EQ(parseScheduleKind("zb_h1"), ScheduleKind::ZeroBubbleH1);
  EXPECT_EQ(parseScheduleKind(""), std::nullopt);
  EXPECT_EQ(parseScheduleKind("zb-h2"), std::nullopt);
  EXPECT_EQ(parseScheduleKind("1f1b "), std::nullopt);
  for (ScheduleKind k : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                         ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1})
    EXPECT_EQ(parseScheduleKind(scheduleKindName(k)), k);
}

TEST(BuildScheduleTest, RejectsInvalidParameters) {
  struct Case {
    ScheduleKind kind;
    int p, m, v;
    const char *message;
  } cases[] = {
      {ScheduleKind::OneFOneB, 0, 4, 1, "pipeline ranks must be at least 1, got 0"},
      {ScheduleKind::OneFOneB, -3, 4, 1, "pipeline ranks must be at least 1, got -3"},
      {ScheduleKind::GPipe, 2, 0, 1, "micro-batches must be at least 1, got 0"},
      {ScheduleKind::Interleaved, 2, 4, 0, "virtual stages per rank must be at least 1"},
      {ScheduleKind::GPipe, 2, 4, 2, "'gpipe' has one stage per rank; 2 virtual stages need 'interleaved'"},
      {ScheduleKind::OneFOneB, 2, 4, 3, "'1f1b' has one stage per rank"},
      {ScheduleKind::ZeroBubbleH1, 2, 4, 2, "'zb-h1' has one stage per rank"},
      {ScheduleKind::OneFOneB, kMaxRanks + 1, 4, 1, "pipeline ranks are supported"},
      {ScheduleKind::OneFOneB, 2, kMaxMicrobatches + 1, 1, "micro-batches are supported"},
      {ScheduleKind::Interleaved, 2, 4, kMaxVirtualStages + 1, "virtual stages per rank are supported"},
      {ScheduleKind::Interleaved, kMaxRanks, kMaxMicrobatches, 8, "more than"},
  };
  for (const Case &c : cases) {
    std::string error;
    Schedule s = buildSchedule(c.kind, c.p, c.m, c.v, &error);
    EXPECT_TRUE(s.empty());
    EXPECT_PRED_FORMAT2(testing::IsSubstring, c.message, error);
    EXPECT_EQ(unitCostBubbleFraction(c.kind, c.p, c.m, c.v), -1.0);
  }
  // No error pointer: still an empty schedule, no crash.
  EXPECT_TRUE(buildSchedule(ScheduleKind::GPipe, 0, 1, 1).empty());
}

//===----------------------------------------------------------------------===//
// Exact orders
//===----------------------------------------------------------------------===//

TEST(BuildScheduleTest, GPipeOrder) {
  Schedule s = build(ScheduleKind::GPipe, 2, 3);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(str(s[0]), "F(0,0) F(0,1) F(0,2) B(0,0) B(0,1) B(0,2)");
  EXPECT_EQ(str(s[1]), "F(1,0) F(1,1) F(1,2) B(1,0) B(1,1) B(1,2)");
}

TEST(BuildScheduleTest, OneFOneBOrder) {
  Schedule s = build(ScheduleKind::OneFOneB, 4, 8);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(str(s[0]), "F(0,0) F(0,1) F(0,2) F(0,3) B(0,0) F(0,4) B(0,1) F(0,5) "
                       "B(0,2) F(0,6) B(0,3) F(0,7) B(0,4) B(0,5) B(0,6) B(0,7)");
  EXPECT_EQ(str(s[1]), "F(1,0) F(1,1) F(1,2) B(1,0) F(1,3) B(1,1) F(1,4) B(1,2) "
                       "F(1,5) B(1,3) F(1,6) B(1,4) F(1,7) B(1,5) B(1,6) B(1,7)");
  EXPECT_EQ(str(s[3]), "F(3,0) B(3,0) F(3,1) B(3,1) F(3,2) B(3,2) F(3,3) B(3,3) "
                       "F(3,4) B(3,4) F(3,5) B(3,5) F(3,6) B(3,6) F(3,7) B(3,7)");
  // Fewer micro-batches than ranks: the warm-up is cut at m.
  Schedule few = build(ScheduleKind::OneFOneB, 4, 2);
  EXPECT_EQ(str(few[0]), "F(0,0) F(0,1) B(0,0) B(0,1)");
  EXPECT_EQ(str(few[2]), "F(2,0) F(2,1) B(2,0) B(2,1)");
  EXPECT_EQ(str(few[3]), "F(3,0) B(3,0) F(3,1) B(3,1)");
}

TEST(BuildScheduleTest, InterleavedOrder) {
  // p=2, v=2: stages 0 and 2 on rank 0, 1 and 3 on rank 1; groups of p=2.
  Schedule s = build(ScheduleKind::Interleaved, 2, 4, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(str(s[0]), "F(0,0) F(0,1) F(2,0) F(2,1) F(0,2) B(2,0) F(0,3) B(2,1) "
                       "F(2,2) B(0,0) F(2,3) B(0,1) B(2,2) B(2,3) B(0,2) B(0,3)");
  EXPECT_EQ(str(s[1]), "F(1,0) F(1,1) F(3,0) B(3,0) F(3,1) B(3,1) F(1,2) B(1,0) "
                       "F(1,3) B(1,1) F(3,2) B(3,2) F(3,3) B(3,3) B(1,2) B(1,3)");
  // One chunk per rank is 1F1B.
  for (int p = 1; p <= 4; ++p)
    for (int m = 1; m <= 6; ++m)
      EXPECT_EQ(build(ScheduleKind::Interleaved, p, m, 1),
                build(ScheduleKind::OneFOneB, p, m));
}

// Megatron-LM's interleaved order for m % p == 0: virtual micro-batch k runs
// chunk (k % (p*v)) / p of micro-batch (k / (p*v)) * p + k % p (backwards:
// the chunk reversed); rank r warms up with (p-r-1)*2 + (v-1)*p forwards.
// (Megatron runs every forward first when m == p; the library keeps the
// formula, capped at m*v: the same makespan, fewer activations on the last
// ranks.)
TEST(BuildScheduleTest, InterleavedEqualsMegatronWhenDivisible) {
  for (int p = 1; p <= 8; ++p)
    for (int v = 2; v <= 4; ++v)
      for (int m = p; m <= 16; m += p) {
        Schedule s = build(ScheduleKind::Interleaved, p, m, v);
        int total = m * v;
        for (int r = 0; r < p; ++r) {
          auto chunk = [&](int k, bool forward) {
            int c = (k % (p * v)) / p;
            return forward ? c : v - 1 - c;
          };
          auto mb = [&](int k) { return (k / (p * v)) * p + k % p; };
          int warmup = std::min((p - r - 1) * 2 + (v - 1) * p, total);
          std::vector<Action> expected;
          int f = 0, b = 0;
          for (; f < warmup; ++f)
            expected.push_back(F(chunk(f, true) * p + r, mb(f)));
          for (; f < total; ++f, ++b) {
            expected.push_back(F(chunk(f, true) * p + r, mb(f)));
            expected.push_back(B(chunk(b, false) * p + r, mb(b)));
          }
          for (; b < total; ++b)
            expected.push_back(B(chunk(b, false) * p + r, mb(b)));
          EXPECT_EQ(str(s[r]), str(expected)) << "p=" << p << " m=" << m
                                              << " v=" << v << " rank " << r;
        }
      }
}

TEST(BuildScheduleTest, ZeroBubbleH1Order) {
  Schedule s = build(ScheduleKind::ZeroBubbleH1, 3, 4);
  ASSERT_EQ(s.size(), 3u);
  // Rank r keeps at most r weight gradients pending.
  EXPECT_EQ(str(s[0]), "F(0,0) F(0,1) F(0,2) BI(0,0) BW(0,0) F(0,3) BI(0,1) "
                       "BW(0,1) BI(0,2) BW(0,2) BI(0,3) BW(0,3)");
  EXPECT_EQ(str(s[1]), "F(1,0) F(1,1) BI(1,0) F(1,2) BI(1,1) BW(1,0) F(1,3) "
                       "BI(1,2) BW(1,1) BI(1,3) BW(1,2) BW(1,3)");
  EXPECT_EQ(str(s[2]), "F(2,0) BI(2,0) F(2,1) BI(2,1) F(2,2) BI(2,2) BW(2,0) "
                       "F(2,3) BI(2,3) BW(2,1) BW(2,2) BW(2,3)");
}

//===----------------------------------------------------------------------===//
// Every kind: complete, deadlock-free, the bubble the formula says
//===----------------------------------------------------------------------===//

class EveryScheduleTest : public ::testing::TestWithParam<ScheduleKind> {};

TEST_P(EveryScheduleTest, CompleteDeadlockFreeAndBubbleAsDerived) {
  ScheduleKind kind = GetParam();
  int maxV = kind == ScheduleKind::Interleaved ? 4 : 1;
  int simulated = 0;
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m)
      for (int v = 1; v <= maxV; ++v) {
        SCOPED_TRACE(std::string(scheduleKindName(kind)) + " p=" +
                     std::to_string(p) + " m=" + std::to_string(m) +
                     " v=" + std::to_string(v));
        Schedule s = build(kind, p, m, v);
        ASSERT_EQ(s.size(), size_t(p));
        bool split = kind == ScheduleKind::ZeroBubbleH1;
        for (int r = 0; r < p; ++r)
          EXPECT_EQ(s[r].size(), size_t(v * m * (split ? 3 : 2)));
        SimulationResult res = simulateSchedule(s, p, m, v);
        ++simulated;
        EXPECT_TRUE(res.complete);
        EXPECT_FALSE(res.deadlock);
        ASSERT_EQ(res.error, "");
        double busy = p * v * m * 3.0; // F + B, or F + BI + BW, per stage
        EXPECT_DOUBLE_EQ(res.busyTime, busy);
        EXPECT_NEAR(res.bubbleFraction, 1 - busy / (p * res.makespan), kEps);
        EXPECT_NEAR(res.bubbleFraction, unitCostBubbleFraction(kind, p, m, v), kEps);
        // A single rank never waits.
        if (p == 1) {
          EXPECT_EQ(res.bubbleFraction, 0.0);
        }
      }
  EXPECT_EQ(simulated, 8 * 16 * maxV);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, EveryScheduleTest,
    ::testing::Values(ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                      ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1),
    [](const ::testing::TestParamInfo<ScheduleKind> &info) {
      switch (info.param) {
      case ScheduleKind::GPipe:
        return std::string("GPipe");
      case ScheduleKind::OneFOneB:
        return std::string("OneFOneB");
      case ScheduleKind::Interleaved:
        return std::string("Interleaved");
      case ScheduleKind::ZeroBubbleH1:
        return std::string("ZeroBubbleH1");
      }
      return std::string("Unknown");
    });

// Deadlock freedom is structural, and the simulator's times must respect
// every dependency and each rank's order: check both with uneven costs and a
// communication delay.
TEST(SimulatorTest, TimesRespectDependenciesWithUnevenCosts) {
  Costs costs;
  costs.forward = 1.5;
  costs.backward = 2.5;
  costs.backwardInput = 1.25;
  costs.backwardWeight = 0.75;
  costs.communication = 0.3;
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::Interleaved, ScheduleKind::ZeroBubbleH1})
    for (int p : {1, 2, 3, 5, 8})
      for (int m : {1, 2, 4, 7, 8, 13})
        for (int v : {1, 2, 3}) {
          if (v > 1 && kind != ScheduleKind::Interleaved)
            continue;
          SCOPED_TRACE(std::string(scheduleKindName(kind)) + " p=" +
                       std::to_string(p) + " m=" + std::to_string(m) +
                       " v=" + std::to_string(v));
          Schedule s = build(kind, p, m, v);
          // Stages of unequal time too.
          costs.stageScale.clear();
          for (int stage = 0; stage < p * v; ++stage)
            costs.stageScale.push_back(1 + 0.5 * (stage % 3));
          SimulationResult res = simulateSchedule(s, p, m, v, costs);
          ASSERT_TRUE(res.complete);
          ASSERT_FALSE(res.deadlock) << res.error;
          int stages = p * v;
          // Finish times, by kind and (stage, micro-batch).
          std::vector<double> fin[4];
          for (auto &f : fin)
            f.assign(size_t(stages) * m, -1);
          double makespan = 0;
          for (int r = 0; r < p; ++r) {
            double prevEnd = 0;
            for (size_t i = 0; i < s[r].size(); ++i) {
              const Action &a = s[r][i];
              double start = res.startTimes[r][i];
              ASSERT_GE(start, prevEnd - kEps);
              prevEnd = start + costs.of(a);
              fin[a.kind][size_t(a.stage) * m + a.microbatch] = prevEnd;
              makespan = std::max(makespan, prevEnd);
            }
          }
          auto after = [&](const Action &a, double start, Action::Kind depKind,
                           int depStage) {
            double f = fin[depKind][size_t(depStage) * m + a.microbatch];
            if (rankOfStage(depStage, p) != rankOfStage(a.stage, p))
              f += costs.communication;
            EXPECT_GE(start, f - kEps) << toString(a);
          };
          for (int r = 0; r < p; ++r)
            for (size_t i = 0; i < s[r].size(); ++i) {
              const Action &a = s[r][i];
              double start = res.startTimes[r][i];
              if (a.kind == Action::F && a.stage > 0)
                after(a, start, Action::F, a.stage - 1);
              if (a.kind == Action::B || a.kind == Action::BI) {
                after(a, start, Action::F, a.stage);
                if (a.stage + 1 < stages)
                  after(a, start,
                        kind == ScheduleKind::ZeroBubbleH1 ? Action::BI : Action::B,
                        a.stage + 1);
              }
              if (a.kind == Action::BW)
                after(a, start, Action::BI, a.stage);
            }
          EXPECT_NEAR(res.makespan, makespan, kEps);
        }
}

//===----------------------------------------------------------------------===//
// Known bubble fractions
//===----------------------------------------------------------------------===//

TEST(BubbleTest, GPipeAndOneFOneBMatchTheClosedForm) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m) {
      double expected = oneFOneBBubble(p, m);
      SimulationResult g = run(ScheduleKind::GPipe, p, m);
      SimulationResult o = run(ScheduleKind::OneFOneB, p, m);
      EXPECT_NEAR(g.bubbleFraction, expected, kEps) << "p=" << p << " m=" << m;
      EXPECT_NEAR(o.bubbleFraction, expected, kEps) << "p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(g.makespan, 3.0 * (m + p - 1));
      EXPECT_DOUBLE_EQ(o.makespan, 3.0 * (m + p - 1));
    }
  // Spot values: p=4, m=8: 3/11; p=8, m=16: 7/23.
  EXPECT_NEAR(run(ScheduleKind::OneFOneB, 4, 8).bubbleFraction, 3.0 / 11, kEps);
  EXPECT_NEAR(run(ScheduleKind::GPipe, 8, 16).bubbleFraction, 7.0 / 23, kEps);
}

TEST(BubbleTest, GPipeAndOneFOneBWithOtherCosts) {
  // With F=f and B=b the makespan is (m+p-1)(f+b) for both.
  for (auto [f, b] : {std::pair{1.0, 3.0}, std::pair{2.0, 3.0}, std::pair{3.0, 1.0}}) {
    Costs costs;
    costs.forward = f;
    costs.backward = b;
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 9; ++m) {
        EXPECT_DOUBLE_EQ(run(ScheduleKind::GPipe, p, m, 1, costs).makespan,
                         (m + p - 1) * (f + b));
        EXPECT_DOUBLE_EQ(run(ScheduleKind::OneFOneB, p, m, 1, costs).makespan,
                         (m + p - 1) * (f + b));
      }
  }
}

TEST(BubbleTest, InterleavedBeatsOneFOneB) {
  for (int p = 2; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m)
      for (int v = 2; v <= 4; ++v) {
        double b = run(ScheduleKind::Interleaved, p, m, v).bubbleFraction;
        double o = oneFOneBBubble(p, m);
        // Megatron's (p-1)/(v*m + p-1) for every m >= p (divisible or not).
        if (m >= p) {
          EXPECT_NEAR(b, double(p - 1) / (v * m + p - 1), kEps)
              << "p=" << p << " m=" << m << " v=" << v;
        } else { // one group of m < p: each chunk waits for the ring to wrap
          EXPECT_NEAR(b, double(v * (p - m) + m - 1) / (v * p + m - 1), kEps)
              << "p=" << p << " m=" << m << " v=" << v;
        }
        if (m % p == 0) {
          EXPECT_LT(b, o) << "p=" << p << " m=" << m << " v=" << v;
        } else {
          EXPECT_LE(b, o + kEps) << "p=" << p << " m=" << m << " v=" << v;
        }
      }
  // Spot values: p=4, m=8: v=2 3/19, v=4 3/35 (1F1B: 3/11).
  EXPECT_NEAR(run(ScheduleKind::Interleaved, 4, 8, 2).bubbleFraction, 3.0 / 19, kEps);
  EXPECT_NEAR(run(ScheduleKind::Interleaved, 4, 8, 4).bubbleFraction, 3.0 / 35, kEps);
}

TEST(BubbleTest, ZeroBubbleH1BeatsOneFOneB) {
  for (int p = 2; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m) {
      SimulationResult z = run(ScheduleKind::ZeroBubbleH1, p, m);
      double o = oneFOneBBubble(p, m);
      EXPECT_LT(z.bubbleFraction, o) << "p=" << p << " m=" << m;
      if (m >= p) {
        // (p-1)(T_F + T_BI - T_BW) of idle time per rank: a third of 1F1B's.
        EXPECT_NEAR(z.bubbleFraction, double(p - 1) / (3 * m + p - 1), kEps)
            << "p=" << p << " m=" << m;
        EXPECT_DOUBLE_EQ(z.makespan, 3.0 * m + p - 1);
      } else {
        EXPECT_DOUBLE_EQ(z.makespan, 2.0 * m + 2 * p - 1);
      }
    }
  // Spot values: p=4, m=8: 3/27 = 1/9 (1F1B: 3/11).
  EXPECT_NEAR(run(ScheduleKind::ZeroBubbleH1, 4, 8).bubbleFraction, 1.0 / 9, kEps);
}

//===----------------------------------------------------------------------===//
// Activation memory
//===----------------------------------------------------------------------===//

TEST(ActivationTest, PeaksInFlight) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m) {
      SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
      SimulationResult g = run(ScheduleKind::GPipe, p, m);
      SimulationResult o = run(ScheduleKind::OneFOneB, p, m);
      SimulationResult z = run(ScheduleKind::ZeroBubbleH1, p, m);
      EXPECT_EQ(o.peakInFlightActivations[0], std::min(p, m));
      for (int r = 0; r < p; ++r) {
        EXPECT_EQ(g.peakInFlightActivations[r], m);
        EXPECT_EQ(o.peakInFlightActivations[r], std::min(p - r, m));
        EXPECT_EQ(g.peakPendingWeightGradients[r], 0);
        EXPECT_EQ(o.peakPendingWeightGradients[r], 0);
        EXPECT_EQ(z.peakPendingWeightGradients[r], std::min(r + 1, m));
      }
      EXPECT_EQ(z.peakInFlightActivations, o.peakInFlightActivations);
      // ZB-H1: activations alive plus weight gradients pending (whose inputs
      // are kept) never exceed p on any rank (the sum only grows at an F).
      Schedule s = build(ScheduleKind::ZeroBubbleH1, p, m);
      for (int r = 0; r < p; ++r) {
        int alive = 0, pending = 0, peak = 0;
        for (const Action &a : s[r]) {
          if (a.kind == Action::F)
            peak = std::max(peak, ++alive + pending);
          else if (a.kind == Action::BI)
            --alive, ++pending;
          else if (a.kind == Action::BW)
            --pending;
        }
        EXPECT_LE(peak, p) << "rank " << r;
      }
    }
}

TEST(ActivationTest, InterleavedPeaks) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m)
      for (int v = 2; v <= 4; ++v) {
        SimulationResult res = run(ScheduleKind::Interleaved, p, m, v);
        for (int r = 0; r < p; ++r)
          EXPECT_EQ(res.peakInFlightActivations[r],
                    std::min(2 * (p - r - 1) + (v - 1) * largestGroup(p, m) + 1, m * v))
              << "p=" << p << " m=" << m << " v=" << v << " rank " << r;
      }
  // p=4, m=8, v=2: 11 chunk activations on rank 0 = 5.5 ranks' worth (1F1B: 4).
  EXPECT_EQ(run(ScheduleKind::Interleaved, 4, 8, 2).peakInFlightActivations,
            (std::vector<int>{11, 9, 7, 5}));
}

//===----------------------------------------------------------------------===//
// The simulator on broken schedules
//===----------------------------------------------------------------------===//

TEST(SimulatorTest, DetectsADeadlockOnOneRank) {
  // Rank 0 runs its backward before its forward; rank 1 waits on rank 0.
  Schedule s = {{B(0, 0), F(0, 0)}, {F(1, 0), B(1, 0)}};
  SimulationResult res = simulateSchedule(s, 2, 1, 1);
  EXPECT_TRUE(res.complete);
  EXPECT_TRUE(res.deadlock);
  EXPECT_EQ(res.error, "deadlock: rank 0 waits at B(0,0) for F(0,0); rank 1 waits "
                       "at F(1,0) for F(0,0)");
  EXPECT_EQ(res.startTimes[0][0], -1.0);
}

TEST(SimulatorTest, DetectsACrossRankCycle) {
  // Rank 1 wants micro-batch 1 first, which rank 0 sends only after its
  // backward of micro-batch 0, which needs rank 1's.
  Schedule s = {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)},
                {F(1, 1), F(1, 0), B(1, 0), B(1, 1)}};
  SimulationResult res = simulateSchedule(s, 2, 2, 1);
  EXPECT_TRUE(res.complete);
  EXPECT_TRUE(res.deadlock);
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "rank 0 waits at B(0,0) for the backward of stage 1, "
                      "micro-batch 0",
                      res.error);
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "rank 1 waits at F(1,1) for F(0,1)", res.error);
  EXPECT_EQ(res.startTimes[0][0], 0.0); // F(0,0) ran
  EXPECT_DOUBLE_EQ(res.makespan, 1.0);
}

TEST(SimulatorTest, DetectsWeightGradientBeforeInputGradient) {
  Schedule s = {{F(0, 0), BW(0, 0), BI(0, 0)}};
  SimulationResult res = simulateSchedule(s, 1, 1, 1);
  EXPECT_TRUE(res.complete);
  EXPECT_TRUE(res.deadlock);
  EXPECT_EQ(res.error, "deadlock: rank 0 waits at BW(0,0) for BI(0,0)");
}

// Groups of p micro-batches with a short last group (what m % p != 0 gives
// when the remainder is simply appended) deadlock under Megatron's warm-up;
// the library's groups of at least p do not.
TEST(SimulatorTest, ShortLastGroupDeadlocks) {
  const int p = 4, m = 5, v = 3;
  std::vector<std::pair<int, int>> order; // (chunk, micro-batch)
  for (int first = 0; first < m; first += p)
    for (int c = 0; c < v; ++c)
      for (int mb = first; mb < std::min(first + p, m); ++mb)
        order.push_back({c, mb});
  Schedule s(p);
  int total = m * v;
  for (int r = 0; r < p; ++r) {
    int warmup = std::min(2 * (p - r - 1) + (v - 1) * p, total), f = 0, b = 0;
    auto fwd = [&](int k) { return F(order[k].first * p + r, order[k].second); };
    auto bwd = [&](int k) { return B((v - 1 - order[k].first) * p + r, order[k].second); };
    for (; f < warmup; ++f)
      s[r].push_back(fwd(f));
    for (; f < total; ++f, ++b) {
      s[r].push_back(fwd(f));
      s[r].push_back(bwd(b));
    }
    for (; b < total; ++b)
      s[r].push_back(bwd(b));
  }
  SimulationResult res = simulateSchedule(s, p, m, v);
  EXPECT_TRUE(res.complete);
  EXPECT_TRUE(res.deadlock);
  SimulationResult ours = run(ScheduleKind::Interleaved, p, m, v);
  EXPECT_FALSE(ours.deadlock);
  EXPECT_NEAR(ours.bubbleFraction, 3.0 / 18, kEps); // (p-1)/(v*m+p-1)
}

TEST(SimulatorTest, ReportsMissingActions) {
  Schedule s = build(ScheduleKind::OneFOneB, 2, 4);
  ASSERT_EQ(s[0].back(), B(0, 3));
  s[0].pop_back();
  SimulationResult res = simulateSchedule(s, 2, 4, 1);
  EXPECT_FALSE(res.complete);
  EXPECT_FALSE(res.deadlock);
  EXPECT_EQ(res.error, "B(0,3) is missing");

  // A missing forward starves the next stage: incomplete and deadlocked.
  Schedule t = build(ScheduleKind::OneFOneB, 2, 2);
  t[0].erase(t[0].begin() + 1); // F(0,1)
  SimulationResult r2 = simulateSchedule(t, 2, 2, 1);
  EXPECT_FALSE(r2.complete);
  EXPECT_TRUE(r2.deadlock);
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "rank 1 waits at F(1,1) for F(0,1)", r2.error);

  // A split backward with its BW missing.
  Schedule z = build(ScheduleKind::ZeroBubbleH1, 1, 2);
  z[0].pop_back();
  SimulationResult r3 = simulateSchedule(z, 1, 2, 1);
  EXPECT_FALSE(r3.complete);
  EXPECT_EQ(r3.error, "BW(0,1) is missing");
  // Empty lists.
  SimulationResult r4 = simulateSchedule(Schedule(3), 3, 1, 1);
  EXPECT_FALSE(r4.complete);
  EXPECT_FALSE(r4.deadlock);
  EXPECT_EQ(r4.error, "F(0,0) is missing");
  EXPECT_EQ(r4.makespan, 0.0);
  EXPECT_EQ(r4.bubbleFraction, 0.0);
}

TEST(SimulatorTest, RejectsMalformedSchedules) {
  struct Case {
    Schedule schedule;
    int p, m, v;
    const char *error;
  } cases[] = {
      {{{F(0, 0), F(0, 0), B(0, 0)}}, 1, 1, 1, "rank 0: F(0,0) appears more than once"},
      {{{F(0, 0), F(1, 0), B(0, 0)}, {B(1, 0)}}, 2, 1, 1, "rank 0: F(1,0) belongs to rank 1"},
      {{{F(0, 0), B(0, 0)}, {F(3, 0)}}, 2, 1, 1, "rank 1: F(3,0) is out of range (2 stages, 1 micro-batches)"},
      {{{F(0, 1)}}, 1, 1, 1, "rank 0: F(0,1) is out of range"},
      {{{F(-1, 0)}}, 1, 1, 1, "rank 0: F(-1,0) is out of range"},
      {{{F(0, 0), B(0, 0), BI(0, 0), BW(0, 0)}}, 1, 1, 1, "stage 0, micro-batch 0 has both B and BI/BW"},
      {{{F(0, 0), B(0, 0)}}, 2, 1, 1, "the schedule has 1 ranks, expected 2"},
      {{{F(0, 0), B(0, 0)}}, 1, 0, 1, "micro-batches must be at least 1"},
      {{{F(0, 0), B(0, 0)}}, 1, 1, 0, "virtual stages per rank must be at least 1"},
  };
  for (const Case &c : cases) {
    SimulationResult res = simulateSchedule(c.schedule, c.p, c.m, c.v);
    EXPECT_FALSE(res.complete);
    EXPECT_FALSE(res.deadlock);
    EXPECT_PRED_FORMAT2(testing::IsSubstring, c.error, res.error);
  }
  Costs negative;
  negative.backwardWeight = -1;
  SimulationResult res = simulateSchedule(build(ScheduleKind::GPipe, 1, 1), 1, 1, 1, negative);
  EXPECT_FALSE(res.complete);
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "non-negative", res.error);
}

TEST(SimulatorTest, CommunicationTime) {
  // One micro-batch through 3 ranks: 3 forwards, 3 backwards (B=2), 2 hops
  // each way.
  Costs costs;
  costs.communication = 0.25;
  SimulationResult res = run(ScheduleKind::GPipe, 3, 1, 1, costs);
  EXPECT_DOUBLE_EQ(res.makespan, 3 * 1 + 3 * 2 + 4 * 0.25);
  EXPECT_DOUBLE_EQ(res.bubbleFraction, 1 - 9.0 / (3 * 10.0));
  // Stages of one rank (p=1, v=3) exchange nothing.
  SimulationResult local = run(ScheduleKind::Interleaved, 1, 2, 3, costs);
  EXPECT_DOUBLE_EQ(local.makespan, 18.0);
  EXPECT_EQ(local.bubbleFraction, 0.0);
}

TEST(SimulatorTest, UnequalStages) {
  // 1F1B, p = 2, m = 4, the second stage three times the first (F = 1,
  // B = 2 on stage 0): rank 1 runs its 4 x (3 + 6) from rank 0's first
  // forward (1) to 37, then rank 0 its last backward (2).
  Costs costs;
  costs.stageScale = {1, 3};
  SimulationResult res = run(ScheduleKind::OneFOneB, 2, 4, 1, costs);
  EXPECT_DOUBLE_EQ(res.makespan, 1 + 4 * 9 + 2);
  EXPECT_DOUBLE_EQ(res.bubbleFraction, 1 - (4 * 3 + 4 * 9) / (2 * 39.0));
  // One factor per stage, none negative.
  costs.stageScale = {1, 3, 1};
  SimulationResult wrong =
      simulateSchedule(build(ScheduleKind::OneFOneB, 2, 4, 1), 2, 4, 1, costs);
  EXPECT_EQ(wrong.error, "the costs scale 3 stages, the schedule has 2");
  costs.stageScale = {1, -1};
  EXPECT_FALSE(
      simulateSchedule(build(ScheduleKind::OneFOneB, 2, 4, 1), 2, 4, 1, costs)
          .error.empty());
}

TEST(SimulatorTest, FormatsSchedules) {
  EXPECT_EQ(toString(BW(12, 3)), "BW(12,3)");
  EXPECT_EQ(formatSchedule(build(ScheduleKind::ZeroBubbleH1, 2, 1)),
            "rank 0: F(0,0) BI(0,0) BW(0,0)\nrank 1: F(1,0) BI(1,0) BW(1,0)\n");
}

} // namespace
