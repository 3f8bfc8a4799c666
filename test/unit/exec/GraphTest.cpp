//===- GraphTest.cpp - The training step recorded as one graph ------------===//
//
// Executor::enableGraphs on a traced device that records steps: the first
// training run queues its instructions one by one, the second records
// them (side streams joined back before the record ends) and launches the
// record, later runs only launch it; evaluations still queue one by one; a
// record the device refuses fails the run, naming what was refused, and
// the next run records again. A dropout's step number goes to the device's
// step counter before each training run, and another seed records again.
// A collective is recorded on the communication stream, which waits after
// each launch for the compute stream's end of it (the communicator's
// deadline watches that stream at the step's end); a pipeline's sends
// still posted at the end are queued into the record and joined back. What
// a record cannot hold is refused up front: a device that records
// nothing.
//
//===----------------------------------------------------------------------===//

#include "TracedDevice.h"

#include <gtest/gtest.h>

using namespace smprt;
using smprt::test::Program;
using smprt::test::TracedDevice;

namespace {

/// The traced device, recording steps: "begin capture", "end capture",
/// "launch graph", "step counter N" (its writes); `refuseNext` makes the
/// next end fail as cudart's would.
class RecordingDevice final : public TracedDevice {
public:
  bool refuseNext = false;
  uint32_t counter = 0;

  bool capturesSteps() const override { return true; }
  Status makeStepCounter(const uint32_t *&word) override {
    word = &counter;
    return Status::success();
  }
  Status writeStepCounter(uint64_t step) override {
    trace.push_back("step counter " + std::to_string(step));
    return Status::success();
  }
  Status beginCapture() override {
    trace.push_back("begin capture");
    return Status::success();
  }
  Status endCapture(std::unique_ptr<Graph> &out) override {
    out.reset();
    if (refuseNext) {
      refuseNext = false;
      trace.push_back("end capture refused");
      return Status::failure("cudaErrorStreamCaptureInvalidated");
    }
    trace.push_back("end capture");
    out = std::make_unique<Record>(*this);
    return Status::success();
  }

private:
  struct Record final : Graph {
    explicit Record(RecordingDevice &d) : dev(d) {}
    Status launch() override {
      dev.trace.push_back("launch graph");
      return Status::success();
    }
    RecordingDevice &dev;
  };
};

using Trace = std::vector<std::string>;

/// `exec` on `dev` with `prog` loaded and graphs on; false (a test
/// failure) when either is refused.
bool startGraphs(Executor &exec, Backend &dev, Program &prog) {
  exec.setBackend(&dev);
  Status s = exec.init(prog.artifact);
  if (s.ok())
    s = exec.enableGraphs();
  EXPECT_TRUE(s.ok()) << s.error;
  return s.ok();
}

/// A recording run's trace: "begin capture", what it issued, then `tail`.
Trace recording(const Trace &issued, const Trace &tail) {
  Trace t = {"begin capture"};
  t.insert(t.end(), issued.begin(), issued.end());
  t.insert(t.end(), tail.begin(), tail.end());
  return t;
}

/// The trace of each of `runs` training runs of `prog` with graphs on.
std::vector<Trace> runsOf(Program &prog, RecordingDevice &dev, int runs) {
  Executor exec;
  startGraphs(exec, dev, prog);
  std::vector<Trace> out;
  for (int r = 0; r < runs; ++r) {
    dev.trace.clear();
    Status s = exec.run();
    if (!s.ok())
      dev.trace.push_back("failed: " + s.error);
    out.push_back(dev.trace);
  }
  return out;
}

// Offloading's copy on its own stream: recorded with the compute it
// overlaps, and joined back before the record ends.
TEST(Graphs, TheSecondRunRecordsAndLaterRunsLaunch) {
  Program prog(4,
               {{"fwd", {}, {0}},
                {"off_act", {0}, {4}},
                {"fwd_more", {1}, {2}},
                {"bwd", {2}, {3}}},
               /*hostBuffers=*/1);
  RecordingDevice dev;
  auto runs = runsOf(prog, dev, 3);
  Trace issued = {"compute run fwd", "compute record e0",
                  "copy wait e0",    "copy run off_act",
                  "copy record e1",  "compute run fwd_more",
                  "compute run bwd", "compute wait e1"};
  Trace first = issued;
  first.push_back("sync");
  EXPECT_EQ(runs[0], first);
  EXPECT_EQ(runs[1],
            recording(issued, {"end capture", "launch graph", "sync"}));
  EXPECT_EQ(runs[2], (Trace{"launch graph", "sync"}));
}

// A record cudart refuses fails its run, and the next run records again.
TEST(Graphs, ARefusedRecordFailsTheRunAndTheNextRecordsAgain) {
  Program prog(2, {{"fwd", {}, {0}}, {"bwd", {0}, {1}}});
  RecordingDevice dev;
  Executor exec;
  ASSERT_TRUE(startGraphs(exec, dev, prog));
  ASSERT_TRUE(exec.run().ok());
  dev.refuseNext = true;
  dev.trace.clear();
  Status s = exec.run();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error, "recording the step as a CUDA graph (--cuda-graph): "
                     "cudaErrorStreamCaptureInvalidated");
  EXPECT_EQ(dev.trace, (Trace{"begin capture", "compute run fwd",
                              "compute run bwd", "end capture refused"}));
  EXPECT_FALSE(exec.graphRecorded());
  dev.trace.clear();
  ASSERT_TRUE(exec.run().ok());
  EXPECT_EQ(dev.trace,
            (Trace{"begin capture", "compute run fwd", "compute run bwd",
                   "end capture", "launch graph", "sync"}));
  EXPECT_TRUE(exec.graphRecorded());
  // An evaluation's forward still queues its instructions one by one.
  dev.trace.clear();
  ASSERT_TRUE(exec.runForward().ok());
  EXPECT_EQ(dev.trace.back(), "sync");
  EXPECT_EQ(std::count(dev.trace.begin(), dev.trace.end(), "launch graph"), 0);
}

/// enableGraphs' error for `prog` on `dev`.
std::string refusal(Program &prog, Backend &dev) {
  Executor exec;
  exec.setBackend(&dev);
  Status s = exec.init(prog.artifact);
  EXPECT_TRUE(s.ok()) << s.error;
  s = exec.enableGraphs();
  EXPECT_FALSE(exec.graphs());
  return s.ok() ? "accepted" : s.error;
}

// A dropout reads the step's number from the device's counter, written
// before every training run, the recorded ones' too; another seed records
// the step again.
TEST(Graphs, ADropoutsStepGoesToTheCounterBeforeEachRun) {
  Program prog(2, {{"fwd", {}, {0}}, {"drop_attn", {0}, {1}}});
  RecordingDevice dev;
  Executor exec;
  ASSERT_TRUE(startGraphs(exec, dev, prog));
  std::vector<Trace> runs;
  for (uint64_t step : {0, 1, 2}) {
    exec.setRandomState(7, step);
    dev.trace.clear();
    ASSERT_TRUE(exec.run().ok());
    runs.push_back(dev.trace);
  }
  EXPECT_EQ(runs[0], (Trace{"step counter 0", "compute run fwd",
                            "compute run drop_attn", "sync"}));
  EXPECT_EQ(runs[1], (Trace{"step counter 1", "begin capture",
                            "compute run fwd", "compute run drop_attn",
                            "end capture", "launch graph", "sync"}));
  EXPECT_EQ(runs[2], (Trace{"step counter 2", "launch graph", "sync"}));
  // An evaluation draws nothing: no write.
  dev.trace.clear();
  ASSERT_TRUE(exec.runForward().ok());
  for (const std::string &t : dev.trace)
    EXPECT_NE(t.rfind("step counter", 0), 0u) << t;
  exec.setRandomState(8, 3);
  dev.trace.clear();
  ASSERT_TRUE(exec.run().ok());
  EXPECT_EQ(dev.trace, (Trace{"step counter 3", "begin capture",
                              "compute run fwd", "compute run drop_attn",
                              "end capture", "launch graph", "sync"}));
}

// A data-parallel step: the all-reduce on the communication stream is
// recorded with the compute, joined back before the record ends; after
// each launch the communication stream waits for the launch's end (e2,
// recorded on the compute stream), so that the step's end waits for it
// there too.
TEST(Graphs, ACollectiveIsRecordedAndItsStreamWaitsForTheLaunch) {
  Program prog(2,
               {{"bwd", {}, {0}}, {"ar_grads", {0}, {0}}, {"upd", {0}, {1}}});
  RecordingDevice dev;
  auto runs = runsOf(prog, dev, 3);
  Trace issued = {"compute run bwd",   "compute record e0", "comm wait e0",
                  "comm run ar_grads", "comm record e1",    "compute wait e1",
                  "compute run upd"};
  Trace first = issued;
  first.push_back("sync");
  EXPECT_EQ(runs[0], first);
  EXPECT_EQ(runs[1],
            recording(issued, {"end capture", "launch graph",
                               "compute record e2", "comm wait e2", "sync"}));
  EXPECT_EQ(runs[2], (Trace{"launch graph", "compute record e2", "comm wait e2",
                            "sync"}));
}

// A pipeline stage's messages: recorded like the collectives, and before
// the record ends the sends still posted are queued (the communicator's
// queueSends; the host's communicator here sends as it posts) and their
// stream joined back (e4; the lanes' own join has nothing left: bwd waited
// for the receive's e2, behind the send's e1 on the same stream). After
// each launch the communication stream waits for its end (e3).
TEST(Graphs, APipelinesMessagesAreRecordedAndTheirSendsJoined) {
  Program prog(3, {{"fwd", {}, {0}},
                   {"send", {0}, {}},
                   {"recv", {}, {1}},
                   {"bwd", {1}, {2}}});
  RecordingDevice dev;
  auto runs = runsOf(prog, dev, 3);
  Trace issued = {"compute run fwd", "compute record e0", "comm wait e0",
                  "comm run send",   "comm record e1",    "compute record e0",
                  "comm wait e0",    "comm run recv",     "comm record e2",
                  "compute wait e2", "compute run bwd"};
  EXPECT_EQ(runs[1],
            recording(issued, {"comm record e4", "compute wait e4",
                               "end capture", "launch graph",
                               "compute record e3", "comm wait e3", "sync"}));
  EXPECT_EQ(runs[2], (Trace{"launch graph", "compute record e3", "comm wait e3",
                            "sync"}));
}

TEST(Graphs, WhatARecordCannotHoldIsRefused) {
  TracedDevice plain; // records nothing
  Program fine(1, {{"fwd", {}, {0}}});
  EXPECT_EQ(refusal(fine, plain),
            "recording the step as a CUDA graph (--cuda-graph): traced:0 "
            "runs each instruction as it is issued and records none; run on "
            "a GPU (--device cuda) or without --cuda-graph");
}

} // namespace
