//===- ProfileTest.cpp - The executor's profile on a device's clock -------===//
//
// Executor::enableProfiling on a device: a backend whose clocks the test
// drives (a queue model of a GPU) checks that each instruction is charged
// the device's time between the timing events around it, the idle time
// before it goes to idleSeconds, and that nothing waits for the device
// until the step's end; a device without a clock waits for each
// instruction instead.
//
//===----------------------------------------------------------------------===//

#include "smp/base/FileFormat.h"
#include "smprt/exec/Executor.h"

#include "ModelDevice.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

using namespace smprt;

namespace {

/// A device on the CPU backend's memory whose work takes the time the
/// instructions' attributes say, on two clocks the test drives: the host's
/// (each step's "host_ms" to issue it, each recorded event `recordMs`) and
/// the device's, which runs queued work in order and no earlier than it was
/// queued: a step issued at host time h ends at max(device, h) +
/// "device_ms"; an event recorded at h marks max(device, h). Times in ms.
class ClockedDevice final : public test::ModelDevice {
public:
  struct Mark final : Event {
    explicit Mark(const Backend &b) : owner(b) {}
    bool query() override { return true; }
    Status synchronize(const std::string &) override {
      return Status::success();
    }
    const Backend &backend() const override { return owner; }
    const Backend &owner;
    bool recorded = false;
    double at = 0.0;
  };

  explicit ClockedDevice(bool clock) : clock_(clock), queue_(*this) {}

  double recordMs = 0.5;
  double host = 0.0, device = 0.0;
  int waits = 0; // synchronize() calls
  bool failElapsed = false;
  /// The kernels' scratch pool: held now (`scratchUsed`, e.g. by work
  /// before), its high-water, and how often it was started again.
  uint64_t scratchUsed = 0, scratchHigh = 0;
  int scratchResets = 0;

  std::string name() const override { return "clocked:0"; }
  Status decode(const smp::artifact::Instruction &inst,
                const std::vector<TensorRef> &, Communicator &,
                const RandomState &, Step &step) override {
    double h = inst.attrs().at("host_ms").f(),
           d = inst.attrs().at("device_ms").f();
    auto it = inst.attrs().find("scratch");
    uint64_t scratch = it == inst.attrs().end() ? 0 : uint64_t(it->second.f());
    step.op = inst.op();
    step.loc = inst.loc();
    step.run = [this, h, d, scratch] {
      host += h;
      device = std::max(device, host) + d;
      scratchUsed += scratch; // a kernel's Scratch, freed after it
      scratchHigh = std::max(scratchHigh, scratchUsed);
      spanHigh = std::max(spanHigh, scratchUsed);
      scratchUsed -= scratch;
      return Status::success();
    };
    return Status::success();
  }
  bool deviceMemoryParts(DeviceMemoryParts &out) const override {
    out = DeviceMemoryParts();
    out.scratchHigh = scratchHigh;
    out.poolHigh = scratchHigh;
    return true;
  }
  bool scratchSpan(bool start, uint64_t &bytes) override {
    if (start) {
      ++scratchResets;
      spanHigh = scratchUsed;
    }
    bytes = spanHigh;
    return true;
  }
  uint64_t spanHigh = 0;
  Status synchronize(const std::string &) override {
    ++waits;
    return Status::success();
  }
  Stream &computeStream() override { return queue_; }
  Status createTimingEvent(std::unique_ptr<Event> &out) override {
    if (clock_)
      out = std::make_unique<Mark>(*this);
    else
      out.reset();
    return Status::success();
  }
  Status elapsed(Event &from, Event &to, double &seconds) override {
    auto &a = static_cast<Mark &>(from), &b = static_cast<Mark &>(to);
    if (failElapsed || !a.recorded || !b.recorded)
      return Status::failure("an event never recorded");
    seconds = (b.at - a.at) * 1e-3;
    return Status::success();
  }

private:
  struct Queue final : Stream {
    explicit Queue(ClockedDevice &d) : dev(d) {}
    Status record(Event &event) override {
      auto *m = dynamic_cast<Mark *>(&event);
      if (!m)
        return Status::failure("not a timing event");
      dev.host += dev.recordMs;
      dev.device = std::max(dev.device, dev.host);
      m->recorded = true;
      m->at = dev.device;
      return Status::success();
    }
    Status wait(Event &) override { return Status::success(); }
    Status synchronize(const std::string &) override {
      return Status::success();
    }
    const Backend &backend() const override { return dev; }
    ClockedDevice &dev;
  };

  bool clock_;
  Queue queue_;
};

/// A program of instructions costing (host ms, device ms) each, named a,
/// b, ..., and its empty weights file.
struct Program {
  Artifact artifact;
  explicit Program(const std::vector<std::pair<double, double>> &costs) {
    artifact.dir = ::testing::TempDir();
    artifact.weightsPath = artifact.dir + "/profile-test-weights.bin";
    std::ofstream(artifact.weightsPath, std::ios::binary).close();
    artifact.weightsChecksum = smp::base::checksum64(nullptr, 0);
    artifact.program.set_arena_bytes(64);
    char name = 'a';
    for (auto [h, d] : costs) {
      auto *inst = artifact.program.add_instructions();
      inst->set_op(std::string(1, name++));
      inst->set_loc("node_" + inst->op());
      (*inst->mutable_attrs())["host_ms"].set_f(h);
      (*inst->mutable_attrs())["device_ms"].set_f(d);
    }
  }
};

const std::vector<std::pair<double, double>> kCosts = {
    {1.0, 1.0}, {1.0, 0.1}, {1.0, 1.0}};

/// kCosts's program on a device with or without a clock, profiled.
struct Profiled {
  ClockedDevice dev;
  Program prog{kCosts};
  Executor exec;
  Status ready;
  explicit Profiled(bool clock) : dev(clock) {
    exec.setBackend(&dev);
    ready = exec.init(prog.artifact);
    if (ready.ok())
      ready = exec.enableProfiling();
  }
};

TEST(Profile, ADevicesClockTimesEachInstructionWithoutWaiting) {
  Profiled t(/*clock=*/true);
  ASSERT_TRUE(t.ready.ok()) << t.ready.error;
  EXPECT_STREQ(t.exec.profileClock(), "device");
  int waits = t.dev.waits; // loading the weights waited
  ASSERT_TRUE(t.exec.run().ok());
  t.dev.host += 3.0; // the host's work between the steps
  ASSERT_TRUE(t.exec.run().ok());
  // One wait a step, at its end: none for the instructions.
  EXPECT_EQ(t.dev.waits - waits, 2);
  // The first step on the two clocks (ms; each record 0.5 on the host):
  // start a at 0.5; a issued by 1.5, done 2.5; b's start 2.5, b issued by
  // 3.5 and done 3.6, its end recorded at host 4.0; c's start at host 4.5
  // (the device idle 0.5 since b's end); c done 6.5; the step's end 6.5.
  // So a 2.0 (1.0 waiting for its launch), b 1.5 (waiting for its end's
  // record), c 2.0 after 0.5 idle. The second the same from host 9.5: a's
  // start at 10.0, the device idle 3.5 since the first step's end.
  auto p = t.exec.profile();
  ASSERT_EQ(p.size(), 3u);
  const double busy[] = {4.0, 3.0, 4.0}, idle[] = {3.5, 0.0, 1.0};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(p[i].op, std::string(1, char('a' + i)));
    EXPECT_EQ(p[i].calls, 2);
    EXPECT_NEAR(p[i].seconds, busy[i] * 1e-3, 1e-12) << p[i].op;
    EXPECT_NEAR(p[i].idleSeconds, idle[i] * 1e-3, 1e-12) << p[i].op;
    EXPECT_GE(p[i].hostSeconds, 0.0);
  }
  // Enabled again (smprun --profile-warmup): the sums restart, the gap
  // since the last step's end (16.0) counted.
  ASSERT_TRUE(t.exec.enableProfiling().ok());
  ASSERT_TRUE(t.exec.run().ok());
  p = t.exec.profile();
  EXPECT_EQ(p[2].calls, 1);
  EXPECT_NEAR(p[2].seconds, 2.0e-3, 1e-12);
  EXPECT_NEAR(p[0].idleSeconds, 0.5e-3, 1e-12);
}

// Each instruction's scratch (the most its kernels held beyond what was
// held before it) is measured once, in the first profiled step: the pool's
// high-water started again before it, read after it; later steps, and the
// profile enabled again (--profile-warmup), keep the figures and measure
// nothing.
TEST(Profile, EachInstructionsScratchIsMeasuredOnce) {
  ClockedDevice dev(/*clock=*/true);
  Program prog(kCosts);
  auto &insts = *prog.artifact.program.mutable_instructions();
  (*insts[1].mutable_attrs())["scratch"].set_f(4096);
  (*insts[2].mutable_attrs())["scratch"].set_f(1000);
  Executor exec;
  exec.setBackend(&dev);
  ASSERT_TRUE(exec.init(prog.artifact).ok());
  ASSERT_TRUE(exec.enableProfiling().ok());
  dev.scratchUsed = dev.scratchHigh = 512; // held by earlier work
  ASSERT_TRUE(exec.run().ok());
  EXPECT_EQ(dev.scratchResets, 3);
  ASSERT_TRUE(exec.run().ok());
  ASSERT_TRUE(exec.enableProfiling().ok());
  ASSERT_TRUE(exec.run().ok());
  EXPECT_EQ(dev.scratchResets, 3);
  auto p = exec.profile();
  const uint64_t want[] = {0, 4096, 1000};
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(p[i].scratchBytes, want[i]) << p[i].op;
}

TEST(Profile, AnEvaluationBetweenStepsIsNotIdleTime) {
  Profiled t(/*clock=*/true);
  ASSERT_TRUE(t.ready.ok()) << t.ready.error;
  ASSERT_TRUE(t.exec.run().ok());
  t.dev.host += 3.0;
  ASSERT_TRUE(t.exec.runForward().ok()); // smprun --eval-data
  ASSERT_TRUE(t.exec.run().ok());
  auto p = t.exec.profile();
  EXPECT_EQ(p[0].calls, 2);
  EXPECT_EQ(p[0].idleSeconds, 0.0);
  EXPECT_NEAR(p[2].idleSeconds, 1.0e-3, 1e-12);
}

TEST(Profile, AFailedTimingNamesTheInstruction) {
  Profiled t(/*clock=*/true);
  ASSERT_TRUE(t.ready.ok()) << t.ready.error;
  t.dev.failElapsed = true;
  EXPECT_EQ(t.exec.run().error,
            "the profile's times of instruction 1 of 3, 'a' (node 'node_a'): "
            "an event never recorded");
}

TEST(Profile, ADeviceWithoutAClockWaitsForEachInstruction) {
  Profiled t(/*clock=*/false);
  ASSERT_TRUE(t.ready.ok()) << t.ready.error;
  EXPECT_STREQ(t.exec.profileClock(), "host");
  int waits = t.dev.waits;
  ASSERT_TRUE(t.exec.run().ok());
  EXPECT_EQ(t.dev.waits - waits, 3 + 1);
  for (const auto &e : t.exec.profile()) {
    EXPECT_EQ(e.seconds, e.hostSeconds);
    EXPECT_EQ(e.idleSeconds, 0.0);
  }
}

TEST(Profile, TheCpuIsTimedOnTheHostsClock) {
  Program prog({});
  Executor exec; // the CPU backend
  ASSERT_TRUE(exec.init(prog.artifact).ok());
  ASSERT_TRUE(exec.enableProfiling().ok());
  EXPECT_STREQ(exec.profileClock(), "host");
}

} // namespace
