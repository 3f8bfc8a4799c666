//===- PipeOrderTest.cpp - The order in which ranks open their pipes ------===//

#include "smprt/comm/PipeOrder.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace smprt;

namespace {

std::string text(const std::vector<PipePair> &pairs) {
  std::string s;
  for (const PipePair &p : pairs)
    s += (s.empty() ? "" : " ") + std::to_string(p.low) + "-" +
         std::to_string(p.high) + "@" + std::to_string(p.round);
  return s;
}

/// The peers of a pipeline of `p` ranks (each rank its neighbours; with
/// `ring`, the last rank and the first too: the interleaved schedule).
std::vector<std::vector<int>> pipeline(int p, bool ring) {
  std::vector<std::vector<int>> peers(p);
  for (int r = 0; r + 1 < p; ++r) {
    peers[r].push_back(r + 1);
    peers[r + 1].push_back(r);
  }
  if (ring && p > 2) {
    peers[0].push_back(p - 1);
    peers[p - 1].push_back(0);
  }
  return peers;
}

// In (low, high) order pair (k, k + 1) waited for (k - 1, k): p - 1 pairs
// end to end. In rounds the chain opens in two.
TEST(PipeOrder, APipelinesChainOpensInTwoRounds) {
  auto rounds = pipeRounds(pipeline(8, false));
  EXPECT_EQ(text(rounds), "0-1@0 2-3@0 4-5@0 6-7@0 1-2@1 3-4@1 5-6@1");
  EXPECT_EQ(text(pipeOrderOf(rounds, 3)), "2-3@0 3-4@1");
  EXPECT_EQ(text(pipeOrderOf(rounds, 0)), "0-1@0");
}

TEST(PipeOrder, AnInterleavedRingOpensInThreeRoundsAtMost) {
  EXPECT_EQ(text(pipeRounds(pipeline(4, true))), "0-1@0 2-3@0 0-3@1 1-2@1");
  auto rounds = pipeRounds(pipeline(5, true));
  EXPECT_EQ(text(rounds), "0-1@0 2-3@0 0-4@1 1-2@1 3-4@2");
}

// The order is one for all ranks, and no rank is in two pairs of a round:
// a rank waits only for pairs earlier in that order, which finish.
TEST(PipeOrder, RoundsAreMatchingsOfEveryPairNamedOnce) {
  // Two replicas of a 4-stage ring (ranks 0-3 and 4-7), one rank naming a
  // peer that does not name it back, and peers out of range.
  auto peers = pipeline(4, true);
  for (int r = 0; r < 4; ++r) {
    peers.push_back({});
    for (int q : peers[r])
      peers.back().push_back(q + 4);
  }
  peers[0].push_back(5); // only rank 0 names it
  peers[1].push_back(99);
  peers[1].push_back(1);
  auto rounds = pipeRounds(peers);
  std::set<std::pair<int, int>> seen;
  for (size_t i = 0; i < rounds.size(); ++i) {
    EXPECT_LT(rounds[i].low, rounds[i].high);
    EXPECT_TRUE(seen.insert({rounds[i].low, rounds[i].high}).second);
    if (i > 0) {
      EXPECT_GE(rounds[i].round, rounds[i - 1].round);
    }
    for (size_t j = 0; j < i; ++j)
      if (rounds[j].round == rounds[i].round)
        for (int r : {rounds[i].low, rounds[i].high})
          EXPECT_TRUE(r != rounds[j].low && r != rounds[j].high)
              << text(rounds);
  }
  EXPECT_EQ(seen.size(), 4u + 4u + 1u);
  EXPECT_TRUE(seen.count({0, 5}));
}

} // namespace
