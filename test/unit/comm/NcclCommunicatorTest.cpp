//===- NcclCommunicatorTest.cpp - The NCCL communicator on one rank -------===//
//
// One rank (a local communicator as the host): what a single GPU can
// exercise. Several ranks need several GPUs. Every test skips without a CUDA
// device; the binary touches CUDA only inside tests (discovery just lists
// them).
//
//===----------------------------------------------------------------------===//

#include "smprt/comm/NcclCommunicator.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

using namespace smprt;

namespace {

class NcclCommunicator : public ::testing::Test {
protected:
  void SetUp() override {
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0)
      GTEST_SKIP() << "no CUDA device ("
                   << (e != cudaSuccess ? cudaGetErrorString(e) : "none")
                   << ")";
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
              cudaSuccess);
    NcclOptions options;
    options.timeoutSeconds = 60;
    Status s = createNcclCommunicator(host_, stream_, options, comm_);
    ASSERT_TRUE(s.ok()) << s.error;
    ASSERT_NE(comm_, nullptr);
  }

  void TearDown() override {
    comm_.reset();
    for (void *p : buffers_)
      EXPECT_EQ(cudaFree(p), cudaSuccess);
    if (stream_)
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
  }

  /// A device buffer of `bytes` bytes, freed by TearDown.
  void *allocate(size_t bytes) {
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess);
    buffers_.push_back(p);
    return p;
  }

  template <class T> T *upload(const std::vector<T> &v) {
    auto *p = static_cast<T *>(allocate(v.size() * sizeof(T)));
    EXPECT_EQ(
        cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
        cudaSuccess);
    return p;
  }

  /// `n` elements at `p` once the communicator's queued work is done.
  template <class T> std::vector<T> download(const T *p, size_t n) {
    Status s = comm_->synchronize("test download");
    EXPECT_TRUE(s.ok()) << s.error;
    std::vector<T> v(n);
    EXPECT_EQ(cudaMemcpyAsync(v.data(), p, n * sizeof(T),
                              cudaMemcpyDeviceToHost, stream_),
              cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return v;
  }

  std::unique_ptr<Communicator> hostOwner_ = makeLocalCommunicator();
  Communicator &host_ = *hostOwner_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Communicator> comm_;
  std::vector<void *> buffers_;
};

TEST_F(NcclCommunicator, IsRankZeroOfOne) {
  EXPECT_EQ(comm_->rank(), 0);
  EXPECT_EQ(comm_->size(), 1);
  EXPECT_EQ(comm_->localSize(), 1);
  EXPECT_STREQ(comm_->backend(), "nccl");
  // Its deadline is the one it was made with (CudaBackend passes the host
  // communicator's, i.e. smprun --timeout).
  EXPECT_EQ(comm_->timeoutSeconds(), 60);
}

TEST_F(NcclCommunicator, AllReduceKeepsTheValues) {
  const std::vector<float> f = {1.5f, -2.25f, 3e-30f, 7e20f};
  std::vector<uint16_t> b;
  for (float x : {0.1f, -3.0f, 65504.0f, 1e-20f})
    b.push_back(floatToBf16(x));
  for (ReduceOp op :
       {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min}) {
    float *df = upload(f);
    Status s = comm_->allReduce(df, f.size(), DType::F32, op, "f32");
    ASSERT_TRUE(s.ok()) << s.error;
    EXPECT_EQ(download(df, f.size()), f) << reduceOpName(op);
    uint16_t *db = upload(b);
    s = comm_->allReduce(db, b.size(), DType::BF16, op, "bf16");
    ASSERT_TRUE(s.ok()) << s.error;
    EXPECT_EQ(download(db, b.size()), b) << reduceOpName(op);
  }
  const std::vector<int64_t> i = {INT64_MIN, 0, INT64_MAX};
  int64_t *di = upload(i);
  ASSERT_TRUE(
      comm_->allReduce(di, i.size(), DType::I64, ReduceOp::Sum, "i64").ok());
  EXPECT_EQ(download(di, i.size()), i);
  const std::vector<uint8_t> flags = {0, 1, 1, 0};
  uint8_t *dflags = upload(flags);
  ASSERT_TRUE(
      comm_->allReduce(dflags, flags.size(), DType::Bool, ReduceOp::Max, "any")
          .ok());
  ASSERT_TRUE(
      comm_->allReduce(dflags, flags.size(), DType::Bool, ReduceOp::Min, "all")
          .ok());
  EXPECT_EQ(download(dflags, flags.size()), flags);
  // Nothing to do: no NCCL call, and a null buffer is fine.
  EXPECT_TRUE(
      comm_->allReduce(nullptr, 0, DType::F32, ReduceOp::Sum, "empty").ok());
}

TEST_F(NcclCommunicator, GathersAndScattersCopy) {
  const std::vector<int32_t> v = {1, 2, 3};
  int32_t *send = upload(v);
  auto *recv = static_cast<int32_t *>(allocate(3 * sizeof(int32_t)));
  Status s = comm_->allGather(send, recv, 3, DType::I32, "gather");
  ASSERT_TRUE(s.ok()) << s.error;
  EXPECT_EQ(download(recv, 3), v);
  // In place: the send buffer is rank 0's slot of recv.
  ASSERT_TRUE(comm_->allGather(recv, recv, 3, DType::I32, "gather").ok());
  EXPECT_EQ(download(recv, 3), v);
  // Overlapping, not in place: gathered from a copy.
  const std::vector<int32_t> w = {7, 8, 9, 10};
  int32_t *buf = upload(w);
  ASSERT_TRUE(comm_->allGather(buf + 1, buf, 3, DType::I32, "gather").ok());
  EXPECT_EQ(download(buf, 4), (std::vector<int32_t>{8, 9, 10, 10}));
  // i16 is moved as bytes (only reductions need NCCL's types).
  const std::vector<int16_t> h = {-1, 2};
  int16_t *hs = upload(h);
  auto *hr = static_cast<int16_t *>(allocate(2 * sizeof(int16_t)));
  ASSERT_TRUE(comm_->allGather(hs, hr, 2, DType::I16, "gather i16").ok());
  EXPECT_EQ(download(hr, 2), h);

  const std::vector<float> in = {0.5f, 1.5f, -2.0f};
  float *din = upload(in);
  auto *dout = static_cast<float *>(allocate(3 * sizeof(float)));
  s = comm_->reduceScatter(din, dout, 3, DType::F32, ReduceOp::Mean, "rs");
  ASSERT_TRUE(s.ok()) << s.error;
  EXPECT_EQ(download(dout, 3), in);
  // In place, then overlapping but not in place (reduced from a copy).
  ASSERT_TRUE(
      comm_->reduceScatter(din, din, 3, DType::F32, ReduceOp::Sum, "rs").ok());
  EXPECT_EQ(download(din, 3), in);
  ASSERT_TRUE(
      comm_->reduceScatter(din, din + 1, 2, DType::F32, ReduceOp::Sum, "rs")
          .ok());
  EXPECT_EQ(download(din, 3), (std::vector<float>{0.5f, 0.5f, 1.5f}));
}

TEST_F(NcclCommunicator, CreatesTheGroupOfItself) {
  std::unique_ptr<Communicator> group;
  Status s = comm_->createGroup({0}, group, "group 0");
  ASSERT_TRUE(s.ok()) << s.error;
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->rank(), 0);
  EXPECT_EQ(group->size(), 1);
  EXPECT_STREQ(group->backend(), "nccl");
  const std::vector<float> f = {4.0f, -1.0f};
  float *d = upload(f);
  ASSERT_TRUE(group->allReduce(d, 2, DType::F32, ReduceOp::Sum, "g").ok());
  s = group->synchronize("group sync");
  ASSERT_TRUE(s.ok()) << s.error;
  EXPECT_EQ(download(d, 2), f);
  // A group of a group.
  std::unique_ptr<Communicator> inner;
  ASSERT_TRUE(group->createGroup({0}, inner, "inner").ok());
  inner.reset();
  group.reset(); // before the communicator it was made from
  EXPECT_EQ(comm_->createGroup({1}, group, "group 1").error,
            "group 1: cannot put rank 1 in a group: the run has 1 rank");
  EXPECT_EQ(group, nullptr);
}

TEST_F(NcclCommunicator, SynchronizesAndRefusesPointToPointToItself) {
  Status s = comm_->synchronize("sync");
  EXPECT_TRUE(s.ok()) << s.error;
  s = comm_->completeSends("sends");
  EXPECT_TRUE(s.ok()) << s.error;
  float *d = upload(std::vector<float>{1.0f});
  EXPECT_EQ(comm_->postSend(d, 4, 0, 3, "send of 'x'").error,
            "send of 'x': rank 0 cannot send to itself");
  EXPECT_EQ(comm_->recv(d, 4, 1, 3, "receive of 'x'").error,
            "receive of 'x': cannot receive from rank 1: the run has 1 rank");
  EXPECT_EQ(comm_->send(d, 4, 0, -1, "s").error,
            "s: rank 0 cannot send to itself");
  // barrier and broadcast are the host communicator's (host memory).
  EXPECT_TRUE(comm_->barrier("barrier").ok());
  int value = 5;
  EXPECT_TRUE(comm_->broadcast(&value, sizeof(value), 0, "bcast").ok());
  EXPECT_EQ(value, 5);
  EXPECT_EQ(comm_->broadcast(&value, sizeof(value), 1, "bcast").error,
            "bcast: root rank 1 does not exist; the run has 1 rank");
  s = comm_->synchronize("sync");
  EXPECT_TRUE(s.ok()) << s.error;
}

// openPipes: none for no peer; a pipe to itself or to a rank the run does
// not have is refused, before anything is made.
TEST_F(NcclCommunicator, OpensPipesOnlyToOtherRanks) {
  Status s = comm_->openPipes({}, "pipes");
  EXPECT_TRUE(s.ok()) << s.error;
  EXPECT_EQ(comm_->openPipes({0}, "pipes").error,
            "pipes: rank 0 cannot open a pipe to itself");
  EXPECT_EQ(comm_->openPipes({2}, "pipes").error,
            "pipes: cannot open a pipe to rank 2: the run has 1 rank");
  s = comm_->synchronize("sync");
  EXPECT_TRUE(s.ok()) << s.error;
}

TEST_F(NcclCommunicator, RefusesWhatItCannotReduce) {
  auto *d = static_cast<int16_t *>(allocate(4 * sizeof(int16_t)));
  EXPECT_EQ(comm_
                ->allReduce(d, 4, DType::I16, ReduceOp::Sum,
                            "all_reduce of 'steps' (instruction 7)")
                .error,
            "all_reduce of 'steps' (instruction 7): NCCL cannot reduce i16 "
            "tensors (it has no 16-bit integer type)");
  EXPECT_EQ(
      comm_->reduceScatter(d, d, 2, DType::U16, ReduceOp::Max, "rs").error,
      "rs: NCCL cannot reduce u16 tensors (it has no 16-bit integer type)");
  // The checks every backend shares.
  EXPECT_EQ(comm_->allReduce(d, 1, DType::I32, ReduceOp::Mean, "m").error,
            "m: mean is defined for float tensors, not i32 (use sum)");
  EXPECT_EQ(comm_->allReduce(d, 1, DType::Bool, ReduceOp::Sum, "b").error,
            "b: sum of bool tensors is not supported (max is 'any', min is "
            "'all')");
  EXPECT_EQ(comm_->allReduce(nullptr, 2, DType::F64, ReduceOp::Sum, "x").error,
            "x: null buffer for 16 bytes");
  EXPECT_EQ(
      comm_->allReduce(d, 1, static_cast<DType>(99), ReduceOp::Sum, "x").error,
      "x: unknown dtype 99");
  // Refusals leave the communicator usable.
  Status s = comm_->synchronize("sync");
  EXPECT_TRUE(s.ok()) << s.error;
}

} // namespace
