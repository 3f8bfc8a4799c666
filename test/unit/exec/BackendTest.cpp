//===- BackendTest.cpp - The backend registry, CPU streams and events -----===//

#include "smprt/exec/BackendRegistry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

using namespace smprt;

namespace {

/// A registry whose factories record what they were asked for.
struct Recorder {
  std::vector<std::pair<int, int>> calls; // (device, localRank)
  BackendFactory factory() {
    return [this](int device, int localRank, std::unique_ptr<Backend> &out) {
      calls.emplace_back(device, localRank);
      out = makeCpuBackend();
      return Status::success();
    };
  }
};

TEST(BackendRegistry, ParsesNameAndDevice) {
  Recorder rec;
  BackendRegistry r;
  r.add("host", /*takesDevice=*/false, rec.factory());
  r.add("gpu", /*takesDevice=*/true, rec.factory());
  std::unique_ptr<Backend> b;
  ASSERT_TRUE(r.create("host", 3, b).ok());
  ASSERT_TRUE(r.create("gpu", 5, b).ok());
  ASSERT_TRUE(r.create("gpu:2", 5, b).ok());
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(rec.calls,
            (std::vector<std::pair<int, int>>{{-1, 3}, {-1, 5}, {2, 5}}));
  EXPECT_EQ(r.names(), (std::vector<std::string>{"host", "gpu"}));
  EXPECT_TRUE(r.has("gpu"));
  EXPECT_FALSE(r.has("tpu"));
}

TEST(BackendRegistry, RefusesWhatItDoesNotKnow) {
  Recorder rec;
  BackendRegistry r;
  r.add("host", false, rec.factory());
  r.add("gpu", true, rec.factory());
  std::unique_ptr<Backend> b;
  for (const char *spec : {"tpu", "host:0", "gpu:", "gpu:x", "gpu:-1", "gpu:1x",
                           "gpu:2000", "gpux", ""})
    EXPECT_EQ(r.create(spec, 0, b).error, "--device '" + std::string(spec) +
                                              "': expected host, gpu or gpu:N")
        << spec;
  EXPECT_TRUE(rec.calls.empty());
}

TEST(BackendRegistry, NamesAMissingBackendAndThoseBuilt) {
  Recorder rec;
  BackendRegistry r;
  r.add("host", false, rec.factory());
  r.addMissing("gpu", "the GPU backend", true, "no compiler for it");
  std::unique_ptr<Backend> b;
  EXPECT_EQ(r.create("gpu:1", 0, b).error,
            "--device gpu:1: this smprun was built without the GPU backend "
            "(no compiler for it); the backends built are: host");
  EXPECT_EQ(r.create("gpu:z", 0, b).error,
            "--device 'gpu:z': expected host, gpu or gpu:N");
  EXPECT_FALSE(r.has("gpu"));
  EXPECT_EQ(r.names(), std::vector<std::string>{"host"});
  // A later registration under a known name does not replace the first.
  r.add("gpu", true, rec.factory());
  EXPECT_FALSE(r.has("gpu"));
}

TEST(BackendRegistry, ThisBuildHasTheCpu) {
  const BackendRegistry &r = availableBackends();
  ASSERT_TRUE(r.has("cpu"));
  std::unique_ptr<Backend> b;
  ASSERT_TRUE(makeBackend("cpu", 0, b).ok());
  EXPECT_EQ(b->name(), "cpu");
  EXPECT_TRUE(b->hostAddressable());
  if (r.has("cuda"))
    GTEST_SKIP() << "built with the CUDA backend";
  Status s = makeBackend("cuda:0", 0, b);
  EXPECT_PRED_FORMAT2(testing::IsSubstring,
                      "--device cuda:0: this smprun was built without the "
                      "CUDA backend (",
                      s.error);
  EXPECT_PRED_FORMAT2(testing::IsSubstring, "); the backends built are: cpu",
                      s.error);
}

TEST(CpuStreams, AreInOrderAndComplete) {
  std::unique_ptr<Backend> cpu = makeCpuBackend();
  Stream &compute = cpu->computeStream();
  EXPECT_EQ(&compute, &cpu->computeStream());
  EXPECT_EQ(&compute.backend(), cpu.get());
  std::unique_ptr<Stream> comm, copies;
  ASSERT_TRUE(cpu->createStream(comm).ok());
  ASSERT_TRUE(cpu->createStream(copies).ok());
  EXPECT_NE(comm.get(), copies.get());
  EXPECT_NE(comm.get(), &compute);
  std::unique_ptr<Event> done;
  ASSERT_TRUE(cpu->createEvent(done).ok());
  EXPECT_EQ(&done->backend(), cpu.get());
  // Never recorded: complete. Recorded: complete (the CPU ran the work
  // when it was issued), and another stream may wait for it.
  EXPECT_TRUE(done->query());
  ASSERT_TRUE(compute.record(*done).ok());
  EXPECT_TRUE(done->query());
  EXPECT_TRUE(comm->wait(*done).ok());
  EXPECT_TRUE(done->synchronize("gradients").ok());
  EXPECT_TRUE(comm->synchronize("all-reduce").ok());
  EXPECT_TRUE(cpu->synchronize("step").ok());
}

TEST(CpuStreams, RefuseAnotherBackendsEvents) {
  std::unique_ptr<Backend> a = makeCpuBackend(), b = makeCpuBackend();
  std::unique_ptr<Event> theirs;
  ASSERT_TRUE(b->createEvent(theirs).ok());
  EXPECT_EQ(a->computeStream().record(*theirs).error,
            "a stream of cpu cannot record an event of another backend (cpu)");
  EXPECT_EQ(a->computeStream().wait(*theirs).error,
            "a stream of cpu cannot wait for an event of another backend "
            "(cpu)");
}

} // namespace
