//===- DeviceGridTest.cpp - The dp x pp x tp grid and its placement -------===//

#include "smp/Target/Artifact/DeviceGrid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace smp;

namespace {

using Order = std::array<int, 3>;
using Coord = std::array<int64_t, 3>;

constexpr Order kDPT{kDataAxis, kPipelineAxis, kTensorAxis};
constexpr Order kTPD{kTensorAxis, kPipelineAxis, kDataAxis};

DeviceGrid makeGrid(int64_t d, int64_t p, int64_t t, Order order) {
  DeviceGrid grid;
  grid.size = {d, p, t};
  grid.order = order;
  return grid;
}

TEST(DeviceGridPlacement, NamesAndLetters) {
  EXPECT_EQ(DeviceGrid::parsePlacement("cluster"), std::optional<Order>(kDPT));
  EXPECT_EQ(DeviceGrid::parsePlacement("spread"), std::optional<Order>(kTPD));
  EXPECT_EQ(DeviceGrid::parsePlacement("DPT"), std::optional<Order>(kDPT));
  EXPECT_EQ(DeviceGrid::parsePlacement("TPD"), std::optional<Order>(kTPD));
  EXPECT_EQ(DeviceGrid::parsePlacement("PDT"),
            std::optional<Order>(Order{kPipelineAxis, kDataAxis, kTensorAxis}));
  EXPECT_EQ(DeviceGrid::parsePlacement("DTP"),
            std::optional<Order>(Order{kDataAxis, kTensorAxis, kPipelineAxis}));
  // Letters in either case.
  EXPECT_EQ(DeviceGrid::parsePlacement("dpt"), std::optional<Order>(kDPT));
  EXPECT_EQ(DeviceGrid::parsePlacement("tpd"), std::optional<Order>(kTPD));
  EXPECT_EQ(DeviceGrid::parsePlacement("tPd"), std::optional<Order>(kTPD));
  EXPECT_EQ(DeviceGrid::parsePlacement("Ptd"),
            std::optional<Order>(Order{kPipelineAxis, kTensorAxis, kDataAxis}));
}

TEST(DeviceGridPlacement, EveryPermutationParses) {
  std::string letters = "DPT";
  std::sort(letters.begin(), letters.end());
  int count = 0;
  do {
    auto order = DeviceGrid::parsePlacement(letters);
    ASSERT_TRUE(order.has_value()) << letters;
    DeviceGrid grid;
    grid.order = *order;
    EXPECT_EQ(grid.placementLetters(), letters);
    ++count;
  } while (std::next_permutation(letters.begin(), letters.end()));
  EXPECT_EQ(count, 6);
}

TEST(DeviceGridPlacement, Invalid) {
  for (const char *s :
       {"", "D", "DP", "DPTD", "DDT", "PPT", "TTT", "XYZ", "DPX", "D-T",
        "Cluster", "SPREAD", "clusters", "spread ", " DPT", "dp t"})
    EXPECT_FALSE(DeviceGrid::parsePlacement(s).has_value()) << "'" << s << "'";
}

TEST(DeviceGridPlacement, Letters) {
  EXPECT_EQ(DeviceGrid().placementLetters(), "DPT"); // the default: cluster
  EXPECT_EQ(makeGrid(2, 2, 2, kTPD).placementLetters(), "TPD");
  EXPECT_EQ(makeGrid(1, 1, 1, *DeviceGrid::parsePlacement("spread"))
                .placementLetters(),
            "TPD");
  EXPECT_EQ(makeGrid(1, 1, 1, *DeviceGrid::parsePlacement("pdt"))
                .placementLetters(),
            "PDT");
}

/// `grid` gives each of these coordinates its rank, and each rank its
/// coordinate.
void expectRanks(const DeviceGrid &grid,
                 std::initializer_list<std::pair<Coord, int64_t>> ranks) {
  for (const auto &[coord, rank] : ranks) {
    EXPECT_EQ(grid.rankOf(coord), rank);
    EXPECT_EQ(grid.coordOf(rank), coord) << "rank " << rank;
  }
}

// The coordinates of ranks 0..7 on a 2 x 2 x 2 grid. Cluster (DPT):
// rank = (d * P + p) * T + t. Spread (TPD): rank = (t * P + p) * D + d,
// data-parallel replicas adjacent.
TEST(DeviceGridRanks, ClusterAndSpread2x2x2) {
  const std::pair<Order, std::array<Coord, 8>> coordsByRank[] = {
      {kDPT,
       {{{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1},
         {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {1, 1, 1}}}},
      {kTPD,
       {{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0},
         {0, 0, 1}, {1, 0, 1}, {0, 1, 1}, {1, 1, 1}}}}};
  for (const auto &[order, coords] : coordsByRank) {
    DeviceGrid grid = makeGrid(2, 2, 2, order);
    EXPECT_EQ(grid.numRanks(), 8);
    for (int64_t rank = 0; rank < 8; ++rank) {
      EXPECT_EQ(grid.rankOf(coords[rank]), rank);
      EXPECT_EQ(grid.coordOf(rank), coords[rank]) << "rank " << rank;
    }
  }
}

// Sizes that differ per axis catch an axis taken for another.
TEST(DeviceGridRanks, UnequalSizes) {
  DeviceGrid cluster = makeGrid(2, 3, 4, kDPT);
  EXPECT_EQ(cluster.numRanks(), 24);
  // 14 = (1*3+0)*4+2, 9 = (0*3+2)*4+1.
  expectRanks(cluster, {{{1, 2, 3}, 23}, {{1, 0, 2}, 14}, {{0, 2, 1}, 9}});

  DeviceGrid spread = makeGrid(2, 3, 4, kTPD);
  EXPECT_EQ(spread.numRanks(), 24);
  // 13 = (2*3+0)*2+1, 10 = (1*3+2)*2+0.
  expectRanks(spread, {{{1, 2, 3}, 23}, {{1, 0, 2}, 13}, {{0, 2, 1}, 10}});

  // PDT with dp 2 x pp 3 (no tp): rank = p * D + d.
  DeviceGrid pdt = makeGrid(2, 3, 1, *DeviceGrid::parsePlacement("PDT"));
  expectRanks(pdt, {{{1, 2, 0}, 5}, {{0, 1, 0}, 2}, {{1, 1, 0}, 3}});
}

// rankOf and coordOf are inverse bijections for every order.
TEST(DeviceGridRanks, RoundTripEveryOrder) {
  std::string letters = "DPT";
  do {
    DeviceGrid grid = makeGrid(2, 3, 4, *DeviceGrid::parsePlacement(letters));
    std::set<int64_t> seen;
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t p = 0; p < 3; ++p)
        for (int64_t t = 0; t < 4; ++t) {
          int64_t rank = grid.rankOf({d, p, t});
          EXPECT_GE(rank, 0) << letters;
          EXPECT_LT(rank, grid.numRanks()) << letters;
          EXPECT_TRUE(seen.insert(rank).second) << letters << " rank " << rank;
          EXPECT_EQ(grid.coordOf(rank), (Coord{d, p, t})) << letters;
        }
    EXPECT_EQ(seen.size(), 24u);
    // The right-most axis varies fastest: rank 1 is one step along it.
    Coord one{0, 0, 0};
    one[grid.order[2]] = 1;
    EXPECT_EQ(grid.coordOf(1), one) << letters;
  } while (std::next_permutation(letters.begin(), letters.end()));
}

/// The groups of ranks 5 (d 1, p 0, t 1) and 2 (d 0, p 1, t 0) along the
/// data, pipeline and tensor axes of a 2 x 2 x 2 grid placed in `order`.
void expectGroups2x2x2(Order order, std::array<std::vector<int>, 3> of5,
                       std::array<std::vector<int>, 3> of2) {
  DeviceGrid grid = makeGrid(2, 2, 2, order);
  for (int axis : {kDataAxis, kPipelineAxis, kTensorAxis}) {
    EXPECT_EQ(grid.group(5, axis), of5[axis]) << "axis " << axis;
    EXPECT_EQ(grid.group(2, axis), of2[axis]) << "axis " << axis;
  }
}

TEST(DeviceGridGroups, Cluster2x2x2) {
  expectGroups2x2x2(kDPT, {{{1, 5}, {5, 7}, {4, 5}}},
                    {{{2, 6}, {0, 2}, {2, 3}}});
}

TEST(DeviceGridGroups, Spread2x2x2) {
  expectGroups2x2x2(kTPD, {{{4, 5}, {5, 7}, {1, 5}}},
                    {{{2, 3}, {0, 2}, {2, 6}}});
}

// Groups are ordered by the coordinate on the axis, contain the rank, and
// partition the ranks.
TEST(DeviceGridGroups, OrderedAndPartition) {
  for (Order order : {kDPT, kTPD}) {
    DeviceGrid grid = makeGrid(2, 3, 4, order);
    for (int axis : {kDataAxis, kPipelineAxis, kTensorAxis}) {
      std::set<int> covered;
      for (int64_t r = 0; r < grid.numRanks(); ++r) {
        std::vector<int> g = grid.group(r, axis);
        ASSERT_EQ(static_cast<int64_t>(g.size()), grid.size[axis]);
        EXPECT_EQ(g[grid.coordOf(r)[axis]], r);
        for (size_t k = 0; k < g.size(); ++k) {
          EXPECT_EQ(grid.coordOf(g[k])[axis], static_cast<int64_t>(k));
          EXPECT_EQ(grid.group(g[k], axis), g); // the same group from a peer
          covered.insert(g[k]);
        }
      }
      EXPECT_EQ(static_cast<int64_t>(covered.size()), grid.numRanks());
    }
  }
  // dp 2 x pp 3 under cluster: pipeline peers are adjacent.
  DeviceGrid grid = makeGrid(2, 3, 1, kDPT);
  EXPECT_EQ(grid.group(4, kPipelineAxis), (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(grid.group(4, kDataAxis), (std::vector<int>{1, 4}));
  EXPECT_EQ(grid.group(4, kTensorAxis), (std::vector<int>{4}));
}

// Hybrid sharding: dp 4 as 2 groups of 2 (dp coordinate d is shard d % 2
// of group d / 2), under dp 4 x tp 2 with the cluster placement: dp peers
// are 2 ranks apart.
TEST(DeviceGridGroups, HybridShardAndReplicaGroups) {
  DeviceGrid grid = makeGrid(4, 1, 2, kDPT);
  grid.dpShard = 2;
  EXPECT_EQ(grid.shardRanks(), 2);
  // Rank 5 is dp 2, tp 1: shard 0 of group 1.
  EXPECT_EQ(grid.group(5, "dp"), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(grid.group(5, "dp_shard"), (std::vector<int>{5, 7}));
  EXPECT_EQ(grid.group(5, "dp_replica"), (std::vector<int>{1, 5}));
  EXPECT_EQ(grid.group(5, "tp"), (std::vector<int>{4, 5}));
  EXPECT_EQ(grid.group(5, "ep"), std::nullopt);
  // Every rank's shard group and replica group meet only in the rank, and
  // together span its dp line.
  for (int64_t r = 0; r < grid.numRanks(); ++r) {
    std::vector<int> shard = *grid.group(r, "dp_shard");
    std::vector<int> replica = *grid.group(r, "dp_replica");
    std::set<int> both(shard.begin(), shard.end());
    for (int x : replica)
      EXPECT_EQ(both.insert(x).second, x != r) << r;
    EXPECT_EQ(both.size(), 3u);
    for (int x : shard)
      EXPECT_EQ(*grid.group(x, "dp_shard"), shard); // the same from a peer
  }
  // Without hybrid sharding the shard group is the dp line, and the
  // replica group the rank alone.
  grid.dpShard = 0;
  EXPECT_EQ(grid.group(5, "dp_shard"), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(grid.group(5, "dp_replica"), (std::vector<int>{5}));
}

TEST(DeviceGridGroups, OneRank) {
  DeviceGrid grid;
  EXPECT_EQ(grid.numRanks(), 1);
  EXPECT_EQ(grid.coordOf(0), (Coord{0, 0, 0}));
  for (int axis : {kDataAxis, kPipelineAxis, kTensorAxis})
    EXPECT_EQ(grid.group(0, axis), (std::vector<int>{0}));
}

} // namespace
