//===- MpiCommTest.cpp - MpiCommunicator on several ranks -----------------===//
//
// Run under mpirun (ctest does: 4 ranks, --oversubscribe):
//
//   smp-comm-mpi-test collectives
//       Every collective with exact expected values (each rank computes what
//       every other rank contributed), also through the chunked paths, and
//       the argument errors. Rank 0 prints "passed: N checks on R ranks";
//       any failure prints "rank R: FAILED ..." and exits 1.
//   smp-comm-mpi-test groups
//       On 4 ranks: createGroup (the pairs {0,1} {0,2} {1,3} {2,3}, every
//       rank alone, all ranks in reverse order, groups of that group) with
//       collectives and messages inside the groups; then postSend in a
//       pipeline pattern where every rank posts to both neighbours before it
//       receives anything (messages over 1 MiB, chunked ones), and the
//       release of completed sends. Prints like collectives.
//   smp-comm-mpi-test peer-exits --timeout S
//       Rank 1 exits with status 3 before the first all-reduce; the others
//       wait in it and must end non-zero, naming it.
//   smp-comm-mpi-test peer-hangs --timeout S
//       Rank 1 sleeps through the all-reduce; the others time out after S s.
//
//===----------------------------------------------------------------------===//

#include "smprt/comm/MpiCommunicator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace smprt;

namespace {

int gRank = 0, gSize = 1, gChecks = 0, gFailures = 0;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    ++gChecks;                                                                 \
    if (!(cond)) {                                                             \
      ++gFailures;                                                             \
      std::fprintf(stderr, "rank %d: FAILED %s:%d: %s: ", gRank, __FILE__,     \
                   __LINE__, #cond);                                           \
      std::fprintf(stderr, __VA_ARGS__);                                       \
      std::fprintf(stderr, "\n");                                              \
    }                                                                          \
  } while (0)

#define CHECK_OK(status)                                                       \
  do {                                                                         \
    Status s_ = (status);                                                      \
    CHECK(s_.ok(), "%s", s_.error.c_str());                                    \
  } while (0)

#define CHECK_ERROR(status, text)                                              \
  do {                                                                         \
    Status s_ = (status);                                                      \
    std::string t_ = (text);                                                   \
    CHECK(!s_.ok() && s_.error.find(t_) != std::string::npos,                  \
          "expected an error containing '%s', got '%s'", t_.c_str(),           \
          s_.error.c_str());                                                   \
  } while (0)

template <typename T> bool sameBits(const T &a, const T &b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Every rank's contribution is value(rank, i): the expected reduction is
/// computed locally over all ranks.
template <typename T>
void checkAllReduce(Communicator &c, DType dtype, ReduceOp op, size_t count,
                    const std::function<T(int, size_t)> &value,
                    const char *label) {
  std::vector<T> data(count);
  for (size_t i = 0; i < count; ++i)
    data[i] = value(c.rank(), i);
  CHECK_OK(c.allReduce(data.data(), count, dtype, op,
                       std::string("all_reduce ") + label));
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    T want = value(0, i);
    for (int r = 1; r < c.size(); ++r) {
      T v = value(r, i);
      if (op == ReduceOp::Sum || op == ReduceOp::Mean)
        want = static_cast<T>(want + v);
      else if (op == ReduceOp::Max)
        want = std::max(want, v);
      else
        want = std::min(want, v);
    }
    if (op == ReduceOp::Mean)
      want = static_cast<T>(want / static_cast<T>(c.size()));
    if (!sameBits(data[i], want))
      ++bad;
  }
  CHECK(bad == 0, "%s %s: %zu of %zu elements differ", label,
        reduceOpName(op), bad, count);
}

/// f16/bf16: values are given as floats and must be exact in the dtype;
/// the expectation is the f32 reduction rounded once.
void checkHalfAllReduce(Communicator &c, DType dtype, ReduceOp op,
                        size_t count,
                        const std::function<float(int, size_t)> &value,
                        const char *label) {
  auto to = dtype == DType::F16 ? floatToHalf : floatToBf16;
  std::vector<uint16_t> data(count);
  for (size_t i = 0; i < count; ++i)
    data[i] = to(value(c.rank(), i));
  CHECK_OK(c.allReduce(data.data(), count, dtype, op,
                       std::string("all_reduce ") + label));
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    float want = value(0, i);
    for (int r = 1; r < c.size(); ++r) {
      float v = value(r, i);
      want = op == ReduceOp::Max   ? std::max(want, v)
             : op == ReduceOp::Min ? std::min(want, v)
                                   : want + v;
    }
    if (op == ReduceOp::Mean)
      want /= static_cast<float>(c.size());
    if (data[i] != to(want))
      ++bad;
  }
  CHECK(bad == 0, "%s %s: %zu of %zu elements differ", label,
        reduceOpName(op), bad, count);
}

void testAllReduce(Communicator &c) {
  const size_t n = 1000;
  for (ReduceOp op :
       {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Mean}) {
    checkAllReduce<float>(
        c, DType::F32, op, n,
        [](int r, size_t i) { return r * 1.5f + 0.25f * (i % 97) - 7; },
        "f32");
    checkAllReduce<double>(
        c, DType::F64, op, n,
        [](int r, size_t i) { return (r + 1) * 1e10 + 0.5 * i; }, "f64");
    checkHalfAllReduce(
        c, DType::F16, op, n,
        [](int r, size_t i) { return (r + 1) * 0.5f + float(i % 8); }, "f16");
    checkHalfAllReduce(
        c, DType::BF16, op, n,
        [](int r, size_t i) { return (r + 1) * 0.5f - float(i % 16); },
        "bf16");
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    checkAllReduce<int64_t>(
        c, DType::I64, op, n,
        [](int r, size_t i) {
          return (int64_t(1) << 40) * (r + 1) - int64_t(i) * (r % 2 ? 3 : -5);
        },
        "i64");
    checkAllReduce<int32_t>(
        c, DType::I32, op, n,
        [](int r, size_t i) { return int32_t(i) * (r - 1); }, "i32");
    checkAllReduce<uint8_t>(
        c, DType::U8, op, n,
        [](int r, size_t i) { return uint8_t((r * 13 + i) % 50); }, "u8");
  }
  // Bool: max is any, min is all.
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min})
    checkAllReduce<uint8_t>(
        c, DType::Bool, op, n,
        [](int r, size_t i) { return uint8_t((i >> r) & 1); }, "bool");

  // f16 is reduced in f32 and rounded once: 2048 + 1 + 1 + 1 is 2051 -> 2052
  // in f16, where adding in f16 would stay at 2048.
  {
    uint16_t v = floatToHalf(c.rank() == 0 ? 2048.0f : 1.0f);
    CHECK_OK(c.allReduce(&v, 1, DType::F16, ReduceOp::Sum, "f16 rounding"));
    CHECK(v == floatToHalf(2048.0f + (c.size() - 1)),
          "f16 sum of 2048 and %d ones gave %g", c.size() - 1,
          halfToFloat(v));
  }

  // Arbitrary f32 values: every rank gets the same bits, and the same
  // reduction twice gives the same bits.
  {
    std::vector<float> a(4097), b;
    uint64_t x = 0x9e3779b97f4a7c15ULL * (c.rank() + 1);
    for (float &v : a) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = static_cast<float>(static_cast<int64_t>(x % 2000001) - 1000000) /
          997.0f;
    }
    b = a;
    CHECK_OK(c.allReduce(a.data(), a.size(), DType::F32, ReduceOp::Sum,
                         "random sum 1"));
    CHECK_OK(c.allReduce(b.data(), b.size(), DType::F32, ReduceOp::Sum,
                         "random sum 2"));
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0,
          "two identical all-reduces differ");
    std::vector<float> all(a.size() * c.size());
    CHECK_OK(c.allGather(a.data(), all.data(), a.size(), DType::F32,
                         "gather the sums"));
    for (int r = 0; r < c.size(); ++r)
      CHECK(std::memcmp(all.data() + r * a.size(), a.data(), a.size() * 4) ==
                0,
            "rank %d got other bits than rank %d", r, c.rank());
  }

  // Errors, the same on every rank.
  int64_t i = 1;
  CHECK_ERROR(c.allReduce(&i, 1, DType::I64, ReduceOp::Mean,
                          "all_reduce of the step counts"),
              "all_reduce of the step counts: mean is defined for float "
              "tensors, not i64 (use sum)");
  uint8_t flag = 1;
  CHECK_ERROR(c.allReduce(&flag, 1, DType::Bool, ReduceOp::Sum, "flags"),
              "flags: sum of bool tensors is not supported");
  CHECK_ERROR(c.allReduce(nullptr, 3, DType::F32, ReduceOp::Sum, "nothing"),
              "nothing: null buffer for 12 bytes");
  CHECK_OK(c.allReduce(nullptr, 0, DType::F32, ReduceOp::Sum, "empty"));
}

void testAllGather(Communicator &c) {
  const size_t n = 5;
  std::vector<int64_t> send(n), recv(n * c.size(), -1);
  for (size_t j = 0; j < n; ++j)
    send[j] = c.rank() * 1000 + int64_t(j);
  CHECK_OK(c.allGather(send.data(), recv.data(), n, DType::I64,
                       "all_gather i64"));
  size_t bad = 0;
  for (int r = 0; r < c.size(); ++r)
    for (size_t j = 0; j < n; ++j)
      bad += recv[r * n + j] != r * 1000 + int64_t(j);
  CHECK(bad == 0, "all_gather: %zu elements differ", bad);

  // In place: this rank's slot of recv is the send buffer.
  std::vector<uint16_t> buf(3 * c.size(), 0);
  for (int j = 0; j < 3; ++j)
    buf[c.rank() * 3 + j] = floatToHalf(c.rank() + j * 0.5f);
  CHECK_OK(c.allGather(buf.data() + c.rank() * 3, buf.data(), 3, DType::F16,
                       "all_gather in place"));
  bad = 0;
  for (int r = 0; r < c.size(); ++r)
    for (int j = 0; j < 3; ++j)
      bad += buf[r * 3 + j] != floatToHalf(r + j * 0.5f);
  CHECK(bad == 0, "all_gather in place: %zu elements differ", bad);
}

void testReduceScatter(Communicator &c) {
  const size_t n = 7;
  const int N = c.size();
  auto value = [](int r, int k, size_t j) {
    return float(r) + 10.0f * k + 100.0f * j;
  };
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Mean}) {
    std::vector<float> send(n * N), recv(n, -1);
    for (int k = 0; k < N; ++k)
      for (size_t j = 0; j < n; ++j)
        send[k * n + j] = value(c.rank(), k, j);
    CHECK_OK(c.reduceScatter(send.data(), recv.data(), n, DType::F32, op,
                             "reduce_scatter f32"));
    size_t bad = 0;
    for (size_t j = 0; j < n; ++j) {
      float want = value(0, c.rank(), j);
      for (int r = 1; r < N; ++r)
        want = op == ReduceOp::Max ? std::max(want, value(r, c.rank(), j))
                                   : want + value(r, c.rank(), j);
      if (op == ReduceOp::Mean)
        want /= N;
      bad += !sameBits(recv[j], want);
    }
    CHECK(bad == 0, "reduce_scatter %s: %zu elements differ",
          reduceOpName(op), bad);
  }
  // In place (recv is the start of send), i64 and bf16.
  {
    std::vector<int64_t> buf(n * N);
    for (int k = 0; k < N; ++k)
      for (size_t j = 0; j < n; ++j)
        buf[k * n + j] = int64_t(c.rank() + 1) << (k + 20);
    CHECK_OK(c.reduceScatter(buf.data(), buf.data(), n, DType::I64,
                             ReduceOp::Sum, "reduce_scatter in place"));
    int64_t want = (int64_t(N) * (N + 1) / 2) << (c.rank() + 20);
    size_t bad = 0;
    for (size_t j = 0; j < n; ++j)
      bad += buf[j] != want;
    CHECK(bad == 0, "reduce_scatter in place: %zu elements differ", bad);
  }
  {
    std::vector<uint16_t> send(n * N), recv(n);
    for (int k = 0; k < N; ++k)
      for (size_t j = 0; j < n; ++j)
        send[k * n + j] = floatToBf16(value(c.rank(), k, j));
    CHECK_OK(c.reduceScatter(send.data(), recv.data(), n, DType::BF16,
                             ReduceOp::Sum, "reduce_scatter bf16"));
    size_t bad = 0;
    for (size_t j = 0; j < n; ++j) {
      // The inputs round to bf16 (620 is not a bf16); their sum in f32 is
      // exact and rounds once.
      float want = 0;
      for (int r = 0; r < N; ++r)
        want += bf16ToFloat(floatToBf16(value(r, c.rank(), j)));
      bad += recv[j] != floatToBf16(want);
    }
    CHECK(bad == 0, "reduce_scatter bf16: %zu elements differ", bad);
  }
}

uint8_t pattern(int from, size_t j) { return uint8_t(from * 31 + j * 7); }

void testPointToPoint(Communicator &c) {
  const int N = c.size(), r = c.rank();
  const int right = (r + 1) % N, left = (r + N - 1) % N;
  const size_t n = 1000;
  // A ring with send/recv: even ranks send first, odd ranks receive first.
  {
    std::vector<uint8_t> out(n), in(n, 0);
    for (size_t j = 0; j < n; ++j)
      out[j] = pattern(r, j);
    if (r % 2 == 0) {
      CHECK_OK(c.send(out.data(), n, right, 7, "ring send"));
      CHECK_OK(c.recv(in.data(), n, left, 7, "ring recv"));
    } else {
      CHECK_OK(c.recv(in.data(), n, left, 7, "ring recv"));
      CHECK_OK(c.send(out.data(), n, right, 7, "ring send"));
    }
    size_t bad = 0;
    for (size_t j = 0; j < n; ++j)
      bad += in[j] != pattern(left, j);
    CHECK(bad == 0, "ring send/recv: %zu bytes differ", bad);
  }
  // The same shift in one sendRecv, the other way round.
  {
    std::vector<uint8_t> out(n), in(n, 0);
    for (size_t j = 0; j < n; ++j)
      out[j] = pattern(r + 100, j);
    CHECK_OK(c.sendRecv(out.data(), n, left, in.data(), n, right, 9,
                        "ring sendRecv"));
    size_t bad = 0;
    for (size_t j = 0; j < n; ++j)
      bad += in[j] != pattern(right + 100, j);
    CHECK(bad == 0, "ring sendRecv: %zu bytes differ", bad);
  }
  // Sizes that do not match are errors (between ranks 0 and 1).
  {
    char buf[20] = {};
    if (r == 0) {
      CHECK_OK(c.send(buf, 10, 1, 3, "short send"));
      CHECK_OK(c.send(buf, 20, 1, 4, "long send"));
    } else if (r == 1) {
      CHECK_ERROR(c.recv(buf, 20, 0, 3, "recv of the activations"),
                  "recv of the activations: rank 1 received 10 bytes from "
                  "rank 0, expected 20");
      CHECK_ERROR(c.recv(buf, 5, 0, 4, "recv of the gradients"),
                  "recv of the gradients: rank 0 sent more than the 5 bytes "
                  "rank 1 expected");
    }
  }
  // Argument errors.
  char b = 0;
  CHECK_ERROR(c.send(&b, 1, r, 0, "send to self"),
              "send to self: rank " + std::to_string(r) +
                  " cannot send to itself");
  CHECK_ERROR(c.recv(&b, 1, N, 0, "recv from nowhere"),
              "recv from nowhere: cannot receive from rank " +
                  std::to_string(N) + ": the run has " + std::to_string(N) +
                  " ranks");
  CHECK_ERROR(c.send(&b, 1, right, -1, "negative tag"),
              "negative tag: tag -1 is negative");
}

void testBroadcastBarrier(Communicator &c) {
  const size_t n = 777;
  for (int root : {0, c.size() - 1}) {
    std::vector<uint8_t> buf(n, 0);
    if (c.rank() == root)
      for (size_t j = 0; j < n; ++j)
        buf[j] = pattern(root + 50, j);
    CHECK_OK(c.broadcast(buf.data(), n, root, "broadcast"));
    size_t bad = 0;
    for (size_t j = 0; j < n; ++j)
      bad += buf[j] != pattern(root + 50, j);
    CHECK(bad == 0, "broadcast from %d: %zu bytes differ", root, bad);
  }
  CHECK_ERROR(c.broadcast(nullptr, 0, c.size(), "broadcast from nowhere"),
              "broadcast from nowhere: root rank " +
                  std::to_string(c.size()) + " does not exist");
  // Nobody leaves the barrier before the last rank (rank 0, 300 ms late)
  // has entered it.
  auto start = std::chrono::steady_clock::now();
  if (c.rank() == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_OK(c.barrier("barrier"));
  double waited = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  CHECK(waited >= 0.25, "left the barrier after %.3f s", waited);
}

void runAll(Communicator &c) {
  testAllReduce(c);
  testAllGather(c);
  testReduceScatter(c);
  testPointToPoint(c);
  testBroadcastBarrier(c);
}

// ---- groups and posted sends ----------------------------------------------

std::string groupName(const std::vector<int> &ranks) {
  std::string s = "{";
  for (int r : ranks)
    s += (s.size() > 1 ? "," : "") + std::to_string(r);
  return s + "}";
}

/// A rank's value in the groups' reductions (exact in f32 and i64).
int64_t groupValue(int worldRank, size_t i) {
  return (worldRank + 1) * 1000 + int64_t(i) * (worldRank + 2);
}

/// The collectives of group `g` of the world ranks `ranks` (group rank k is
/// world rank ranks[k]), with expectations computed from `ranks`.
void checkGroupCollectives(Communicator &g, const std::vector<int> &ranks,
                           int worldRank) {
  const std::string name = "group " + groupName(ranks);
  const int me = static_cast<int>(
      std::find(ranks.begin(), ranks.end(), worldRank) - ranks.begin());
  CHECK(g.size() == int(ranks.size()), "%s: size %d", name.c_str(), g.size());
  CHECK(g.rank() == me, "%s: rank %d, expected %d", name.c_str(), g.rank(), me);
  CHECK(std::string(g.backend()) == "mpi", "%s: backend %s", name.c_str(),
        g.backend());
  const size_t n = 1000;
  {
    std::vector<int64_t> v(n);
    std::vector<float> f(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = groupValue(worldRank, i);
      f[i] = static_cast<float>(groupValue(worldRank, i)) * 0.5f;
    }
    CHECK_OK(g.allReduce(v.data(), n, DType::I64, ReduceOp::Sum,
                         "all_reduce i64 in " + name));
    CHECK_OK(g.allReduce(f.data(), n, DType::F32, ReduceOp::Sum,
                         "all_reduce f32 in " + name));
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t want = 0;
      for (int r : ranks)
        want += groupValue(r, i);
      bad += v[i] != want;
      bad += !sameBits(f[i], static_cast<float>(want) * 0.5f);
    }
    CHECK(bad == 0, "%s: all_reduce sum: %zu elements differ", name.c_str(),
          bad);
  }
  {
    int32_t top = worldRank * 10;
    CHECK_OK(g.allReduce(&top, 1, DType::I32, ReduceOp::Max,
                         "all_reduce max in " + name));
    CHECK(top == *std::max_element(ranks.begin(), ranks.end()) * 10,
          "%s: max %d", name.c_str(), top);
  }
  {
    std::vector<int64_t> send(3), recv(3 * ranks.size(), -1);
    for (int j = 0; j < 3; ++j)
      send[j] = worldRank * 100 + j;
    CHECK_OK(g.allGather(send.data(), recv.data(), 3, DType::I64,
                         "all_gather in " + name));
    size_t bad = 0;
    for (size_t k = 0; k < ranks.size(); ++k)
      for (int j = 0; j < 3; ++j)
        bad += recv[k * 3 + j] != ranks[k] * 100 + j;
    CHECK(bad == 0, "%s: all_gather: %zu elements differ", name.c_str(), bad);
  }
  {
    int64_t root = worldRank == ranks.back() ? 4242 : -1;
    CHECK_OK(
        g.broadcast(&root, sizeof(root), g.size() - 1, "broadcast in " + name));
    CHECK(root == 4242, "%s: broadcast gave %lld", name.c_str(),
          static_cast<long long>(root));
  }
  CHECK_OK(g.barrier("barrier in " + name));
}

uint8_t message(int from, int to, int m, size_t j) {
  return uint8_t(from * 37 + to * 11 + m * 101 + j * 7 + (j >> 9));
}

/// Counts the bytes of `in` that are not message(from, to, m, *).
size_t badBytes(const std::vector<uint8_t> &in, int from, int to, int m) {
  size_t bad = 0;
  for (size_t j = 0; j < in.size(); ++j)
    bad += in[j] != message(from, to, m, j);
  return bad;
}

/// Both members of a pair post a message of over 1 MiB to the other before
/// either receives (send() would deadlock here once MPI waits for the
/// receiver), from a buffer overwritten right after the post.
void exchangeInPair(Communicator &g, const std::vector<int> &ranks,
                    int worldRank, bool complete) {
  const std::string name = "group " + groupName(ranks);
  const int peer = 1 - g.rank();
  const size_t bytes = (size_t(1) << 21) + 3;
  std::vector<uint8_t> buf(bytes);
  for (size_t j = 0; j < bytes; ++j)
    buf[j] = message(worldRank, ranks[peer], 7, j);
  CHECK_OK(g.postSend(buf.data(), bytes, peer, 11, "postSend in " + name));
  std::fill(buf.begin(), buf.end(), 0xEE);
  std::vector<uint8_t> in(bytes, 0);
  CHECK_OK(g.recv(in.data(), bytes, peer, 11, "recv in " + name));
  size_t bad = badBytes(in, ranks[peer], worldRank, 7);
  CHECK(bad == 0, "%s: %zu bytes of the posted message differ", name.c_str(),
        bad);
  auto *mpi = dynamic_cast<MpiCommunicator *>(&g);
  CHECK(mpi != nullptr, "%s is no MpiCommunicator", name.c_str());
  if (complete) {
    CHECK_OK(g.completeSends("end of the exchange in " + name));
    if (mpi)
      CHECK(mpi->pendingSends() == 0, "%s: %zu sends pending", name.c_str(),
            mpi->pendingSends());
  }
  // Otherwise the destructor finds the send pending (or already released).
}

void testGroups(MpiCommunicator &world) {
  const int r = world.rank(), N = world.size();
  // Errors, before anything is created (no rank waits for another here).
  {
    std::unique_ptr<Communicator> none;
    CHECK_ERROR(world.createGroup({}, none, "empty group"),
                "empty group: a group needs at least one rank");
    CHECK_ERROR(world.createGroup({r, (r + 1) % N, r}, none, "twice"),
                "twice: rank " + std::to_string(r) + " is in the group twice");
    CHECK_ERROR(world.createGroup({r, N}, none, "too far"),
                "too far: cannot put rank " + std::to_string(N) +
                    " in a group: the run has " + std::to_string(N) + " ranks");
    int other = (r + 1) % N, another = (r + 2) % N;
    CHECK_ERROR(world.createGroup({other, another}, none, "others"),
                "others: rank " + std::to_string(r) + " is not in the group {" +
                    std::to_string(other) + ", " + std::to_string(another) +
                    "} (only its members create a group)");
    CHECK(none == nullptr, "a failed createGroup made a communicator");
  }

  // The pairs, created in the same order on every rank, while the world
  // communicator's chunks are 4 KiB: the pairs inherit them.
  const std::vector<std::vector<int>> pairs = {{0, 1}, {0, 2}, {1, 3}, {2, 3}};
  world.setMaxChunkBytes(4096);
  world.setTimeout(300);
  std::vector<std::unique_ptr<Communicator>> groups;
  std::vector<std::vector<int>> members;
  for (const auto &ranks : pairs) {
    if (std::find(ranks.begin(), ranks.end(), r) == ranks.end())
      continue;
    std::unique_ptr<Communicator> g;
    CHECK_OK(world.createGroup(ranks, g, "pair " + groupName(ranks)));
    if (!g)
      return;
    groups.push_back(std::move(g));
    members.push_back(ranks);
  }
  world.setMaxChunkBytes(size_t(1) << 30);
  world.setTimeout(600);
  CHECK(groups.size() == 2, "rank %d is in %zu pairs", r, groups.size());
  for (size_t k = 0; k < groups.size(); ++k) {
    auto *mpi = dynamic_cast<MpiCommunicator *>(groups[k].get());
    CHECK(mpi && mpi->timeout() == 300, "the pair did not inherit the timeout");
    // What a device communicator made on the pair (NCCL) takes as its own.
    CHECK(groups[k]->timeoutSeconds() == 300,
          "the pair reports a deadline of %g s, not 300",
          groups[k]->timeoutSeconds());
    checkGroupCollectives(*groups[k], members[k], r);
  }
  for (size_t k = 0; k < groups.size(); ++k)
    exchangeInPair(*groups[k], members[k], r, k == 0);
  // The second pair still holds its posted send (unless it completed).
  groups.clear();

  // Every rank alone.
  {
    std::unique_ptr<Communicator> g;
    CHECK_OK(world.createGroup({r}, g, "group of rank " + std::to_string(r)));
    if (!g)
      return;
    checkGroupCollectives(*g, {r}, r);
    char b = 0;
    CHECK_ERROR(g->postSend(&b, 1, 0, 0, "alone"),
                "alone: rank 0 cannot send to itself");
    CHECK_ERROR(g->postSend(&b, 1, 1, 0, "alone"),
                "alone: cannot send to rank 1: the run has 1 rank");
    CHECK_OK(g->completeSends("alone"));
    std::unique_ptr<Communicator> gg;
    CHECK_OK(g->createGroup({0}, gg, "group of the group of one"));
    if (gg)
      checkGroupCollectives(*gg, {r}, r);
  }

  // All ranks in reverse order: group rank k is world rank N-1-k. Then the
  // halves of that group, named by its ranks: {0,1} is world {N-1,N-2}.
  {
    std::vector<int> reversed(N);
    for (int k = 0; k < N; ++k)
      reversed[k] = N - 1 - k;
    std::unique_ptr<Communicator> g;
    CHECK_OK(world.createGroup(reversed, g, "reversed world"));
    if (!g)
      return;
    checkGroupCollectives(*g, reversed, r);
    int half = g->rank() < N / 2 ? 0 : 1;
    std::vector<int> local, global;
    for (int k = half * (N / 2); k < (half + 1) * (N / 2); ++k) {
      local.push_back(k);
      global.push_back(reversed[k]);
    }
    std::unique_ptr<Communicator> h;
    CHECK_OK(g->createGroup(local, h, "half of the reversed world"));
    if (h)
      checkGroupCollectives(*h, global, r);
    h.reset(); // before the group it was made from
  }
}

void testPostSendErrors(MpiCommunicator &c) {
  const int r = c.rank(), right = (r + 1) % c.size();
  char b = 0;
  CHECK_ERROR(c.postSend(&b, 1, r, 0, "post to self"),
              "post to self: rank " + std::to_string(r) +
                  " cannot send to itself");
  CHECK_ERROR(c.postSend(&b, 1, c.size(), 0, "post to nowhere"),
              "post to nowhere: cannot send to rank " +
                  std::to_string(c.size()) + ": the run has " +
                  std::to_string(c.size()) + " ranks");
  CHECK_ERROR(c.postSend(&b, 1, right, -2, "negative tag"),
              "negative tag: tag -2 is negative");
  CHECK_ERROR(c.postSend(nullptr, 8, right, 0, "no buffer"),
              "no buffer: null buffer for 8 bytes");
  CHECK(c.pendingSends() == 0, "%zu sends pending after errors",
        c.pendingSends());
}

/// A pipeline step: every rank posts 3 messages to each neighbour before it
/// receives anything, then receives its neighbours' messages.
void testPipeline(MpiCommunicator &c) {
  const int N = c.size(), r = c.rank();
  const int right = (r + 1) % N, left = (r + N - 1) % N;
  const size_t kDefaultChunk = size_t(1) << 30;
  struct Message {
    size_t bytes, chunk;
  };
  const Message msgs[3] = {{1000, kDefaultChunk},
                           {(size_t(1) << 20) + 12345, kDefaultChunk},
                           {300007, 4096}}; // 74 MPI messages
  std::vector<uint8_t> buf;
  for (int m = 0; m < 3; ++m) {
    c.setMaxChunkBytes(msgs[m].chunk);
    for (int to : {right, left}) {
      buf.assign(msgs[m].bytes, 0);
      for (size_t j = 0; j < buf.size(); ++j)
        buf[j] = message(r, to, m, j);
      CHECK_OK(c.postSend(buf.data(), buf.size(), to, 30 + m,
                          "postSend of message " + std::to_string(m) +
                              " to rank " + std::to_string(to)));
      // The message is copied: the peer must not see this.
      std::fill(buf.begin(), buf.end(), 0xEE);
    }
  }
  c.setMaxChunkBytes(kDefaultChunk);
  CHECK(c.pendingSends() <= 6, "%zu sends pending", c.pendingSends());
  for (int m = 0; m < 3; ++m) {
    c.setMaxChunkBytes(msgs[m].chunk);
    for (int from : {left, right}) {
      std::vector<uint8_t> in(msgs[m].bytes, 0);
      CHECK_OK(c.recv(in.data(), in.size(), from, 30 + m,
                      "recv of message " + std::to_string(m) + " from rank " +
                          std::to_string(from)));
      size_t bad = badBytes(in, from, r, m);
      CHECK(bad == 0, "message %d from rank %d: %zu of %zu bytes differ", m,
            from, bad, in.size());
    }
  }
  c.setMaxChunkBytes(kDefaultChunk);
  CHECK_OK(c.completeSends("end of the pipeline step"));
  CHECK(c.pendingSends() == 0, "%zu sends pending after completeSends",
        c.pendingSends());

  // A posted message and a sent one with the same tag arrive in order.
  {
    std::vector<uint8_t> a(100), b(100), in(100);
    for (size_t j = 0; j < 100; ++j) {
      a[j] = message(r, right, 4, j);
      b[j] = message(r, right, 5, j);
    }
    auto receive = [&] {
      for (int m : {4, 5}) {
        CHECK_OK(c.recv(in.data(), 100, left, 40, "recv in order"));
        CHECK(badBytes(in, left, r, m) == 0, "message %d out of order", m);
      }
    };
    if (r % 2)
      receive();
    CHECK_OK(c.postSend(a.data(), 100, right, 40, "posted first"));
    CHECK_OK(c.send(b.data(), 100, right, 40, "sent second"));
    if (r % 2 == 0)
      receive();
    CHECK_OK(c.completeSends("in order"));
  }

  // Many small messages, each received by the next rank before the next
  // post: the copies of completed sends are released on the way.
  {
    size_t most = 0, bad = 0;
    std::vector<uint8_t> out(64), in(64);
    for (int i = 0; i < 300; ++i) {
      for (size_t j = 0; j < 64; ++j)
        out[j] = message(r, right, i, j);
      CHECK_OK(c.postSend(out.data(), 64, right, 41, "small post"));
      most = std::max(most, c.pendingSends());
      CHECK_OK(c.recv(in.data(), 64, left, 41, "small recv"));
      bad += badBytes(in, left, r, i);
    }
    CHECK(bad == 0, "small messages: %zu bytes differ", bad);
    CHECK(most <= 2 * static_cast<size_t>(N), "up to %zu sends pending", most);
    CHECK_OK(c.completeSends("small posts"));
  }
  testPostSendErrors(c);
}

/// Sums the failures over the ranks; rank 0 reports. The exit status.
int finish(MpiCommunicator &comm, const std::string &detail) {
  int32_t failures = gFailures;
  Status s = comm.allReduce(&failures, 1, DType::I32, ReduceOp::Sum,
                            "the failure count");
  if (!s.ok() || failures != 0) {
    if (gRank == 0)
      std::fprintf(stderr, "%d checks failed: %s\n", failures, s.error.c_str());
    return 1;
  }
  if (gRank == 0)
    std::printf("passed: %d checks on %d ranks%s\n", gChecks, gSize,
                detail.c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  MpiOptions options;
  options.program = "smp-comm-mpi-test";
  for (int i = 2; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--timeout")
      options.timeoutSeconds = std::atof(argv[i + 1]);
  std::unique_ptr<MpiCommunicator> comm;
  Status s = MpiCommunicator::create(options, comm);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.error.c_str());
    return 1;
  }
  gRank = comm->rank();
  gSize = comm->size();
  if (mode == "collectives") {
    if (gSize < 2) {
      std::fprintf(stderr, "run me on at least 2 ranks\n");
      return 1;
    }
    runAll(*comm);
    int before = gChecks;
    // Again through the chunked paths: 64-byte MPI calls.
    comm->setMaxChunkBytes(64);
    runAll(*comm);
    comm->setMaxChunkBytes(size_t(1) << 30);
    return finish(*comm, " (" + std::to_string(gChecks - before) +
                             " of them chunked)");
  }
  if (mode == "groups") {
    if (gSize != 4) {
      std::fprintf(stderr, "run me on 4 ranks\n");
      return 1;
    }
    testGroups(*comm);
    testPipeline(*comm);
    return finish(*comm, "");
  }
  if (mode == "peer-exits" || mode == "peer-hangs") {
    if (gRank == 1) {
      // Late enough that the others already wait in the all-reduce.
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      if (mode == "peer-exits")
        ::_exit(3);
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return 0;
    }
    std::vector<float> grads(1000, 1.0f);
    s = comm->allReduce(grads.data(), grads.size(), DType::F32, ReduceOp::Sum,
                        "all_reduce of the gradients of 'wte.weight' "
                        "(instruction 412, node '/lm_head/MatMul')");
    std::fprintf(stderr, "rank %d: the all-reduce returned (%s)\n", gRank,
                 s.ok() ? "ok" : s.error.c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: smp-comm-mpi-test collectives | groups | "
                       "peer-exits | peer-hangs [--timeout S]\n");
  return 2;
}
