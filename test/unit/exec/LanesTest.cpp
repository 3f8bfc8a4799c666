//===- LanesTest.cpp - Side streams: which work waits for which -----------===//
//
// LaneHazards alone (the byte-range conflicts and what stays pending), then
// the executor on a device that writes down every stream operation, so
// that the order it queues is checked as a GPU would see it: a collective
// starts after the compute work before it, compute that does not touch its
// buffers is not held up, the first instruction that does waits for it,
// and the step's end waits for whatever is left.
//
//===----------------------------------------------------------------------===//

#include "smp/base/FileFormat.h"
#include "smprt/exec/Executor.h"
#include "smprt/exec/LaneHazards.h"

#include "ModelDevice.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

using namespace smprt;

namespace {

Access touching(std::vector<ByteRange> reads, std::vector<ByteRange> writes) {
  return Access{std::move(reads), std::move(writes)};
}

TEST(LaneHazards, ConflictsNeedAWriteToSharedBytes) {
  ByteRange a{0, 0, 100}, b{0, 50, 150}, after{0, 100, 200}, host{1, 0, 100};
  EXPECT_TRUE(conflicts(touching({a}, {}), touching({}, {b})));  // RAW
  EXPECT_TRUE(conflicts(touching({}, {a}), touching({b}, {})));  // WAR
  EXPECT_TRUE(conflicts(touching({}, {a}), touching({}, {b})));  // WAW
  EXPECT_FALSE(conflicts(touching({a}, {}), touching({b}, {}))); // reads
  EXPECT_FALSE(conflicts(touching({}, {a}), touching({after}, {after})));
  EXPECT_FALSE(conflicts(touching({}, {a}), touching({host}, {host})));
}

TEST(LaneHazards, ComputeWaitsOnceForWhatItTouches) {
  LaneHazards h;
  Access reduce = touching({{0, 0, 100}}, {{0, 0, 100}});
  Access elsewhere = touching({{0, 200, 300}}, {{0, 300, 400}});
  Access reads = touching({{0, 50, 60}}, {{0, 400, 500}});
  EXPECT_TRUE(h.before(Lane::Comm, reduce).empty());
  h.queued(7, Lane::Comm, reduce);
  EXPECT_TRUE(h.before(Lane::Compute, elsewhere).empty());
  EXPECT_FALSE(h.empty());
  EXPECT_EQ(h.before(Lane::Compute, reads), std::vector<size_t>{7});
  EXPECT_TRUE(h.empty());
  EXPECT_TRUE(h.before(Lane::Compute, reads).empty());
  EXPECT_TRUE(h.drain().empty());
}

TEST(LaneHazards, SideLanesWaitForEachOtherButStayPending) {
  LaneHazards h;
  Access reduce = touching({{0, 0, 100}}, {{0, 0, 100}});
  Access offload = touching({{0, 0, 100}}, {{1, 0, 100}});
  h.queued(1, Lane::Comm, reduce);
  // The same lane is ordered by its stream; another lane waits.
  EXPECT_TRUE(h.before(Lane::Comm, offload).empty());
  EXPECT_EQ(h.before(Lane::Copy, offload), std::vector<size_t>{1});
  h.queued(2, Lane::Copy, offload);
  EXPECT_EQ(h.drain(), (std::vector<size_t>{1, 2}));
  EXPECT_TRUE(h.empty());
}

TEST(LaneHazards, WaitingForOneEndsTheEarlierOnesOfItsLane) {
  LaneHazards h;
  Access first = touching({{0, 0, 10}}, {{0, 0, 10}});
  Access second = touching({{0, 10, 20}}, {{0, 10, 20}});
  Access copy = touching({{0, 40, 50}}, {{1, 0, 10}});
  h.queued(1, Lane::Comm, first);
  h.queued(2, Lane::Copy, copy);
  h.queued(3, Lane::Comm, second);
  EXPECT_EQ(h.before(Lane::Compute, touching({{0, 15, 16}}, {})),
            std::vector<size_t>{3});
  EXPECT_EQ(h.drain(), std::vector<size_t>{2}); // 1 ended before 3
}

/// A device on the CPU backend's memory that runs nothing and writes down
/// every stream operation: "<stream> run <op>", "<stream> record eN",
/// "<stream> wait eN" (events numbered as made), "sync".
class TracedDevice final : public test::ModelDevice {
public:
  std::vector<std::string> trace;

  struct Mark final : Event {
    Mark(const Backend &b, int id) : owner(b), id(id) {}
    bool query() override { return true; }
    Status synchronize(const std::string &) override {
      return Status::success();
    }
    const Backend &backend() const override { return owner; }
    const Backend &owner;
    int id;
  };
  struct Queue final : Stream {
    Queue(TracedDevice &d, const char *name) : dev(d), name(name) {}
    Status record(Event &e) override {
      dev.trace.push_back(name + " record e" +
                          std::to_string(static_cast<Mark &>(e).id));
      return Status::success();
    }
    Status wait(Event &e) override {
      dev.trace.push_back(name + " wait e" +
                          std::to_string(static_cast<Mark &>(e).id));
      return Status::success();
    }
    Status synchronize(const std::string &) override {
      return Status::success();
    }
    const Backend &backend() const override { return dev; }
    TracedDevice &dev;
    std::string name;
  };

  std::string name() const override { return "traced:0"; }
  /// The op names its lane: "ar..." communication, "off..." copies.
  Status decode(const smp::artifact::Instruction &inst,
                const std::vector<TensorRef> &, Communicator &,
                const RandomState &, Step &step) override {
    step.op = inst.op();
    step.lane = step.op.rfind("ar", 0) == 0    ? Lane::Comm
                : step.op.rfind("off", 0) == 0 ? Lane::Copy
                                               : Lane::Compute;
    Queue *q = &static_cast<Queue &>(laneStream(step.lane));
    step.run = [this, q, op = step.op] {
      trace.push_back(q->name + " run " + op);
      return Status::success();
    };
    return Status::success();
  }
  Status synchronize(const std::string &) override {
    trace.push_back("sync");
    return Status::success();
  }
  Stream &computeStream() override { return compute_; }
  Stream &laneStream(Lane lane) override {
    return lane == Lane::Comm ? comm_ : lane == Lane::Copy ? copy_ : compute_;
  }
  Status createEvent(std::unique_ptr<Event> &out) override {
    out = std::make_unique<Mark>(*this, events_++);
    return Status::success();
  }

private:
  Queue compute_{*this, "compute"}, comm_{*this, "comm"}, copy_{*this, "copy"};
  int events_ = 0;
};

/// A program over buffers of 64 bytes each at 64 * index (pool 1: the
/// host pool's), of instructions (op, inputs, outputs).
struct Program {
  Artifact artifact;
  struct Inst {
    std::string op;
    std::vector<uint32_t> in, out;
  };
  Program(int buffers, const std::vector<Inst> &insts, int hostBuffers = 0) {
    artifact.dir = ::testing::TempDir();
    artifact.weightsPath = artifact.dir + "/lanes-test-weights.bin";
    std::ofstream(artifact.weightsPath, std::ios::binary).close();
    artifact.weightsChecksum = smp::base::checksum64(nullptr, 0);
    auto &p = artifact.program;
    p.set_arena_bytes(64 * buffers);
    p.set_host_arena_bytes(64 * hostBuffers);
    for (int b = 0; b < buffers + hostBuffers; ++b) {
      auto *buf = p.add_buffers();
      buf->set_dtype(static_cast<uint32_t>(DType::F32));
      buf->add_shape(16);
      buf->set_pool(b < buffers ? 0 : 1);
      buf->set_offset(64 * (b < buffers ? b : b - buffers));
      buf->set_bytes(64);
    }
    for (const Inst &i : insts) {
      auto *inst = p.add_instructions();
      inst->set_op(i.op);
      inst->set_loc("node_" + i.op);
      for (uint32_t b : i.in)
        inst->add_inputs(b);
      for (uint32_t b : i.out)
        inst->add_outputs(b);
    }
  }
};

/// The trace of one step of `prog` (the events: e0 the compute point a
/// side step starts after, then one a side step in program order).
std::vector<std::string> traceOf(Program &prog, bool overlap) {
  TracedDevice dev;
  Executor exec;
  exec.setBackend(&dev);
  exec.setOverlap(overlap);
  Status s = exec.init(prog.artifact);
  EXPECT_TRUE(s.ok()) << s.error;
  dev.trace.clear();
  s = exec.run();
  EXPECT_TRUE(s.ok()) << s.error;
  return dev.trace;
}

// Data parallelism's backward: a bucket's all-reduce queued after its
// gradient, the rest of the backward not held up, the optimizer waiting.
TEST(Lanes, AnAllReduceOverlapsTheComputeThatDoesNotNeedIt) {
  // 0: the bucket's gradient, 1 and 2: other gradients, 3: a parameter.
  Program prog(4, {{"grad", {}, {0}},
                   {"ar_bucket", {0}, {0}},
                   {"grad_more", {}, {1}},
                   {"grad_last", {1}, {2}},
                   {"update", {0, 3}, {3}}});
  EXPECT_EQ(traceOf(prog, true),
            (std::vector<std::string>{
                "compute run grad", "compute record e0", "comm wait e0",
                "comm run ar_bucket", "comm record e1", "compute run grad_more",
                "compute run grad_last", "compute wait e1",
                "compute run update", "sync"}));
  // --no-overlap: waited for at once.
  EXPECT_EQ(traceOf(prog, false),
            (std::vector<std::string>{
                "compute run grad", "compute record e0", "comm wait e0",
                "comm run ar_bucket", "comm record e1", "compute wait e1",
                "compute run grad_more", "compute run grad_last",
                "compute run update", "sync"}));
}

// The memory plan reuses a collective's input once the program has moved
// past it: compute that overwrites it waits, as does compute that writes
// the output; what nobody touches again is waited for at the step's end.
TEST(Lanes, ReusedMemoryWaitsAndTheStepEndWaitsForTheRest) {
  Program prog(4, {{"grad", {}, {0}},
                   {"ar_gather", {0}, {1}},
                   {"reuse", {}, {0}},
                   {"ar_last", {2}, {2}},
                   {"other", {3}, {3}}});
  EXPECT_EQ(traceOf(prog, true),
            (std::vector<std::string>{
                "compute run grad", "compute record e0", "comm wait e0",
                "comm run ar_gather", "comm record e1", "compute wait e1",
                "compute run reuse", "compute record e0", "comm wait e0",
                "comm run ar_last", "comm record e2", "compute run other",
                "compute wait e2", "sync"}));
}

// Offloading: the copy out to the host pool on the copy stream while the
// forward goes on; its prefetch back waits behind it (another lane), and
// the backward that reads the prefetched activation waits for that.
TEST(Lanes, OffloadCopiesOverlapAndTheirReadersWait) {
  // Buffer 4 is the host pool's.
  Program prog(4,
               {{"fwd", {}, {0}},
                {"off_act", {0}, {4}},
                {"fwd_more", {1}, {2}},
                {"ar_x", {2}, {2}},
                {"off_back", {4}, {3}},
                {"bwd", {3}, {1}}},
               /*hostBuffers=*/1);
  EXPECT_EQ(traceOf(prog, true),
            (std::vector<std::string>{
                "compute run fwd", "compute record e0", "copy wait e0",
                "copy run off_act", "copy record e1", "compute run fwd_more",
                "compute record e0", "comm wait e0", "comm run ar_x",
                "comm record e2", "compute record e0", "copy wait e0",
                "copy run off_back", "copy record e3", "compute wait e3",
                "compute run bwd", "compute wait e2", "sync"}));
}

} // namespace
