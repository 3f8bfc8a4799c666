//===- MpiCollectivesTest.cpp - Every collective with exact expectations ---===//

#include "MpiTestCheck.h"

using namespace smprt;

namespace mpitest {
namespace {

/// The reduction by `op` of value(r, i) over ranks r = 0..ranks-1, computed
/// in T in rank order (Mean: the sum divided by the ranks).
template <typename T>
T reduced(ReduceOp op, int ranks, size_t i,
          const std::function<T(int, size_t)> &value) {
  T want = value(0, i);
  for (int r = 1; r < ranks; ++r) {
    T v = value(r, i);
    if (op == ReduceOp::Max)
      want = std::max(want, v);
    else if (op == ReduceOp::Min)
      want = std::min(want, v);
    else
      want = static_cast<T>(want + v);
  }
  if (op == ReduceOp::Mean)
    want = static_cast<T>(want / static_cast<T>(ranks));
  return want;
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
  for (size_t i = 0; i < count; ++i)
    if (!sameBits(data[i], reduced(op, c.size(), i, value)))
      ++bad;
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
  for (size_t i = 0; i < count; ++i)
    if (data[i] != to(reduced(op, c.size(), i, value)))
      ++bad;
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

} // namespace

void runCollectiveTests(Communicator &c) {
  testAllReduce(c);
  testAllGather(c);
  testReduceScatter(c);
  testPointToPoint(c);
  testBroadcastBarrier(c);
}

} // namespace mpitest
