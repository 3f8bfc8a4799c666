//===- LocalCommunicatorTest.cpp - The single-rank communicator -----------===//

#include "smprt/comm/Communicator.h"
#include "smprt/exec/Executor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

using namespace smprt;

namespace {

TEST(LocalCommunicator, IsRankZeroOfOne) {
  std::unique_ptr<Communicator> local = makeLocalCommunicator();
  Communicator &c = *local;
  EXPECT_EQ(c.rank(), 0);
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(c.localSize(), 1);
  EXPECT_STREQ(c.backend(), "local");
  EXPECT_EQ(&localCommunicator(), &localCommunicator());
}

TEST(LocalCommunicator, AllReduceKeepsTheValues) {
  std::unique_ptr<Communicator> local = makeLocalCommunicator();
  Communicator &c = *local;
  for (ReduceOp op :
       {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Mean}) {
    std::vector<float> f = {1.5f, -2.25f, 3e-30f, 7e20f};
    auto before = f;
    ASSERT_TRUE(c.allReduce(f.data(), f.size(), DType::F32, op, "f32").ok());
    EXPECT_EQ(0, std::memcmp(f.data(), before.data(), f.size() * 4));
    std::vector<double> d = {1e300, -0.1};
    ASSERT_TRUE(c.allReduce(d.data(), d.size(), DType::F64, op, "f64").ok());
    EXPECT_EQ(d[0], 1e300);
    EXPECT_EQ(d[1], -0.1);
    std::vector<uint16_t> h = {floatToHalf(0.1f), floatToHalf(-65504.0f)};
    auto hb = h;
    ASSERT_TRUE(c.allReduce(h.data(), h.size(), DType::F16, op, "f16").ok());
    EXPECT_EQ(h, hb);
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    std::vector<int64_t> i = {INT64_MIN, 0, INT64_MAX};
    ASSERT_TRUE(c.allReduce(i.data(), i.size(), DType::I64, op, "i64").ok());
    EXPECT_EQ(i, (std::vector<int64_t>{INT64_MIN, 0, INT64_MAX}));
  }
}

TEST(LocalCommunicator, RefusesWhatMpiRefuses) {
  std::unique_ptr<Communicator> local = makeLocalCommunicator();
  Communicator &c = *local;
  int64_t i = 3;
  Status s = c.allReduce(&i, 1, DType::I64, ReduceOp::Mean,
                         "all_reduce of 'steps' (instruction 7)");
  EXPECT_EQ(s.error, "all_reduce of 'steps' (instruction 7): mean is defined "
                     "for float tensors, not i64 (use sum)");
  uint8_t b = 1;
  EXPECT_EQ(c.allReduce(&b, 1, DType::Bool, ReduceOp::Sum, "flags").error,
            "flags: sum of bool tensors is not supported (max is 'any', min "
            "is 'all')");
  EXPECT_TRUE(c.allReduce(&b, 1, DType::Bool, ReduceOp::Max, "any").ok());
  EXPECT_EQ(c.allReduce(nullptr, 2, DType::F64, ReduceOp::Sum, "x").error,
            "x: null buffer for 16 bytes");
  EXPECT_TRUE(c.allReduce(nullptr, 0, DType::F64, ReduceOp::Sum, "x").ok());
  EXPECT_EQ(c.allReduce(&i, 1, static_cast<DType>(99), ReduceOp::Sum, "x")
                .error,
            "x: unknown dtype 99");
}

TEST(LocalCommunicator, GathersAndScattersCopy) {
  std::unique_ptr<Communicator> local = makeLocalCommunicator();
  Communicator &c = *local;
  std::vector<int32_t> send = {1, 2, 3}, recv(3, 0);
  ASSERT_TRUE(c.allGather(send.data(), recv.data(), 3, DType::I32, "g").ok());
  EXPECT_EQ(recv, send);
  // In place: the send buffer is rank 0's slot of recv.
  ASSERT_TRUE(c.allGather(recv.data(), recv.data(), 3, DType::I32, "g").ok());
  EXPECT_EQ(recv, send);
  std::vector<float> in = {0.5f, 1.5f}, out(2, 0);
  ASSERT_TRUE(c.reduceScatter(in.data(), out.data(), 2, DType::F32,
                              ReduceOp::Mean, "rs")
                  .ok());
  EXPECT_EQ(out, in);
  EXPECT_FALSE(c.reduceScatter(in.data(), out.data(), 2, DType::I32,
                               ReduceOp::Mean, "rs")
                   .ok());
}

TEST(LocalCommunicator, HasNoPeers) {
  std::unique_ptr<Communicator> local = makeLocalCommunicator();
  Communicator &c = *local;
  char buf[4] = {};
  EXPECT_EQ(c.send(buf, 4, 1, 0, "send of the activations of stage 0").error,
            "send of the activations of stage 0: cannot send to rank 1: the "
            "run has 1 rank");
  EXPECT_EQ(c.recv(buf, 4, 0, 0, "recv").error,
            "recv: rank 0 cannot receive from itself");
  EXPECT_EQ(c.sendRecv(buf, 4, 1, buf, 4, 1, 0, "shift").error,
            "shift: cannot send to rank 1: the run has 1 rank");
  EXPECT_TRUE(c.barrier("barrier").ok());
  EXPECT_TRUE(c.broadcast(buf, 4, 0, "bcast").ok());
  EXPECT_EQ(c.broadcast(buf, 4, 2, "bcast").error,
            "bcast: root rank 2 does not exist; the run has 1 rank");
}

TEST(LocalCommunicator, PostedSendsHaveNoPeers) {
  std::unique_ptr<Communicator> local = makeLocalCommunicator();
  Communicator &c = *local;
  char buf[4] = {};
  EXPECT_EQ(
      c.postSend(buf, 4, 1, 0, "send of the activations of stage 0").error,
      "send of the activations of stage 0: cannot send to rank 1: the "
      "run has 1 rank");
  EXPECT_EQ(c.postSend(buf, 4, 0, 0, "post").error,
            "post: rank 0 cannot send to itself");
  EXPECT_TRUE(c.completeSends("end of step").ok());
}

TEST(LocalCommunicator, ItsOnlyGroupIsItself) {
  std::unique_ptr<Communicator> local = makeLocalCommunicator();
  Communicator &c = *local;
  std::unique_ptr<Communicator> g;
  ASSERT_TRUE(c.createGroup({0}, g, "tensor-parallel group").ok());
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->rank(), 0);
  EXPECT_EQ(g->size(), 1);
  EXPECT_STREQ(g->backend(), "local");
  std::vector<float> f = {1.5f, -2.0f};
  ASSERT_TRUE(
      g->allReduce(f.data(), f.size(), DType::F32, ReduceOp::Sum, "sum").ok());
  EXPECT_EQ(f, (std::vector<float>{1.5f, -2.0f}));
  // A group of the group.
  std::unique_ptr<Communicator> gg;
  EXPECT_TRUE(g->createGroup({0}, gg, "again").ok());
  EXPECT_NE(gg, nullptr);

  std::unique_ptr<Communicator> none;
  EXPECT_EQ(c.createGroup({1}, none, "pipeline group").error,
            "pipeline group: cannot put rank 1 in a group: the run has 1 rank");
  EXPECT_EQ(c.createGroup({}, none, "empty group").error,
            "empty group: a group needs at least one rank");
  EXPECT_EQ(c.createGroup({0, 0}, none, "twice").error,
            "twice: rank 0 is in the group twice");
  EXPECT_EQ(c.createGroup({-1}, none, "negative").error,
            "negative: cannot put rank -1 in a group: the run has 1 rank");
  EXPECT_EQ(none, nullptr);
}

TEST(LocalCommunicator, AbortExitsWithTheCode) {
  // OpenBLAS has started threads by now: re-execute for the death test.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(makeLocalCommunicator()->abort(7), ::testing::ExitedWithCode(7),
              "");
}

TEST(ReduceOp, NamesRoundTrip) {
  for (ReduceOp op :
       {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Mean}) {
    ReduceOp parsed = ReduceOp::Sum;
    ASSERT_TRUE(parseReduceOp(reduceOpName(op), parsed));
    EXPECT_EQ(parsed, op);
  }
  ReduceOp op;
  EXPECT_FALSE(parseReduceOp("avg", op));
}

TEST(Executor, DefaultsToTheLocalCommunicator) {
  Executor exec;
  EXPECT_EQ(&exec.communicator(), &localCommunicator());
  std::unique_ptr<Communicator> mine = makeLocalCommunicator();
  exec.setCommunicator(mine.get());
  EXPECT_EQ(&exec.communicator(), mine.get());
  exec.setCommunicator(nullptr);
  EXPECT_EQ(&exec.communicator(), &localCommunicator());
}

} // namespace
