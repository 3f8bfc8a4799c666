//===- PipeOrder.cpp - The order in which ranks open their pipes ----------===//

#include "smprt/comm/PipeOrder.h"

#include <algorithm>
#include <set>
#include <utility>

namespace smprt {

std::vector<PipePair>
pipeRounds(const std::vector<std::vector<int>> &peersOfRank) {
  const int n = static_cast<int>(peersOfRank.size());
  std::set<std::pair<int, int>> pairs;
  for (int r = 0; r < n; ++r)
    for (int peer : peersOfRank[r])
      if (peer >= 0 && peer < n && peer != r)
        pairs.insert({std::min(r, peer), std::max(r, peer)});
  // Each rank's rounds taken so far; a pair takes the first round free on
  // both of its ranks.
  std::vector<std::vector<bool>> busy(n);
  std::vector<PipePair> out;
  for (auto [low, high] : pairs) {
    int round = 0;
    auto taken = [&](int r) {
      return round < static_cast<int>(busy[r].size()) && busy[r][round];
    };
    while (taken(low) || taken(high))
      ++round;
    for (int r : {low, high}) {
      if (static_cast<int>(busy[r].size()) <= round)
        busy[r].resize(round + 1, false);
      busy[r][round] = true;
    }
    out.push_back({low, high, round});
  }
  std::stable_sort(
      out.begin(), out.end(),
      [](const PipePair &a, const PipePair &b) { return a.round < b.round; });
  return out;
}

std::vector<PipePair> pipeOrderOf(const std::vector<PipePair> &rounds,
                                  int rank) {
  std::vector<PipePair> mine;
  for (const PipePair &p : rounds)
    if (p.low == rank || p.high == rank)
      mine.push_back(p);
  return mine;
}

} // namespace smprt
