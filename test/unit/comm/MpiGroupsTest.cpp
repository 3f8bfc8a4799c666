//===- MpiGroupsTest.cpp - Rank groups and posted sends on 4 ranks --------===//

#include "MpiTestCheck.h"

using namespace smprt;

namespace mpitest {
namespace {


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

} // namespace

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

static void testPostSendErrors(MpiCommunicator &c) {
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

} // namespace mpitest
