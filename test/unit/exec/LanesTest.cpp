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

#include "smprt/exec/Executor.h"
#include "smprt/exec/LaneHazards.h"

#include "TracedDevice.h"

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

using namespace smprt;
using smprt::test::Program;
using smprt::test::TracedDevice;

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
