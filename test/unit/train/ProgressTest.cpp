//===- ProgressTest.cpp - The progress line and its durations -------------===//
//
// The live and log lines are timing-dependent in the lit tests (train-
// progress.test matches their shape); their arithmetic is pinned here with
// fixed step records.
//
//===----------------------------------------------------------------------===//

#include "smprt/train/Progress.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace smprt;

TEST(Progress, DurationsRoundToTheSecond) {
  EXPECT_EQ(formatDuration(0), "0:00:00");
  EXPECT_EQ(formatDuration(0.49), "0:00:00");
  EXPECT_EQ(formatDuration(0.73), "0:00:01");
  EXPECT_EQ(formatDuration(59.6), "0:01:00");
  EXPECT_EQ(formatDuration(3725), "1:02:05");
  EXPECT_EQ(formatDuration(-1), "-");
  EXPECT_EQ(formatDuration(NAN), "-");
}

TEST(Progress, JsonNumbersHoldNoInfinity) {
  EXPECT_EQ(jsonNumber(0.5), "0.5");
  EXPECT_EQ(jsonNumber(INFINITY), "null");
  EXPECT_EQ(jsonNumber(NAN), "null");
}

namespace {
RunFacts gptFacts() {
  RunFacts facts;
  facts.totalSteps = 3;
  facts.globalBatch = 8;
  facts.tokensPerSample = 16;
  facts.stepFlops = 2e9;
  facts.peakFlops = 1e12;
  return facts;
}

StepRecord firstStep() {
  StepRecord rec{};
  rec.step = 1;
  rec.loss = 4.167976;
  rec.lr = 1e-3;
  rec.gradNorm = 0.702511;
  rec.elapsed = 0.3665; // a slow first step: 2 steps left take 0.733 s
  return rec;
}
} // namespace

// The ETA is the time per step so far times the steps left: a slow first
// step of 3 says 0:00:01 (CI's once; the lit test had pinned 0:00:00).
TEST(Progress, TheLiveLineSaysRatesAndTheTimeLeft) {
  Reporter reporter(gptFacts(), ProgressMode::Live, 10, false);
  // 8 samples x 16 tokens in 0.3665 s: 349.2 tok/s; 2 GFLOP in 0.3665 s on
  // a 1 TFLOP/s device: MFU 0.5%.
  EXPECT_EQ(reporter.progressLine(firstStep(), 1, 0.3665, true),
            "step 1/3  loss 4.1680  lr 1.00e-03  gnorm 0.703  349.2 tok/s  "
            "MFU 0.5%  366.5 ms/step  ETA 0:00:01");
}

TEST(Progress, TheLogLineIsMegatronsAndResumesCountOnlyThisLaunch) {
  RunFacts facts = gptFacts();
  facts.totalSteps = 12;
  facts.firstStep = 10; // resumed after step 10
  facts.numRanks = 2;
  Reporter reporter(facts, ProgressMode::Log, 5, false);
  StepRecord rec = firstStep();
  rec.step = 11;
  rec.elapsed = 2.0; // one step in this launch: 1 left takes 2 s
  // Rates over 5 steps in 1 s: 40 samples/s, 640 tokens/s; 2 GFLOP over 2
  // ranks at 5 steps/s: 5 GFLOP/s per device, MFU 0.5%.
  EXPECT_EQ(reporter.progressLine(rec, 5, 1.0, false),
            "iteration 11/12 | loss 4.167976 | lr 1.000e-03 | grad norm 0.703 "
            "| 640 tokens/s | 0.005 TFLOP/s/device | MFU 0.5% | "
            "200.0 ms/step | elapsed 0:00:02 | ETA 0:00:02");
}
