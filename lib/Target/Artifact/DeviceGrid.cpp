//===- DeviceGrid.cpp - The dp x pp x tp grid and its placement -----------===//

#include "smp/Target/Artifact/DeviceGrid.h"

namespace smp {

std::optional<std::array<int, 3>>
DeviceGrid::parsePlacement(const std::string &s) {
  std::string letters = s == "cluster" ? "DPT" : s == "spread" ? "TPD" : s;
  if (letters.size() != 3)
    return std::nullopt;
  std::array<int, 3> order{};
  bool seen[3] = {false, false, false};
  for (int i = 0; i < 3; ++i) {
    char c = letters[i];
    int axis = c == 'D' || c == 'd'   ? kDataAxis
               : c == 'P' || c == 'p' ? kPipelineAxis
               : c == 'T' || c == 't' ? kTensorAxis
                                      : -1;
    if (axis < 0 || seen[axis])
      return std::nullopt;
    seen[axis] = true;
    order[i] = axis;
  }
  return order;
}

std::string DeviceGrid::placementLetters() const {
  std::string s;
  for (int axis : order)
    s += "DPT"[axis];
  return s;
}

int64_t DeviceGrid::rankOf(const std::array<int64_t, 3> &coord) const {
  int64_t rank = 0;
  for (int axis : order)
    rank = rank * size[axis] + coord[axis];
  return rank;
}

std::array<int64_t, 3> DeviceGrid::coordOf(int64_t rank) const {
  std::array<int64_t, 3> coord{0, 0, 0};
  for (int i = 2; i >= 0; --i) {
    int axis = order[i];
    coord[axis] = rank % size[axis];
    rank /= size[axis];
  }
  return coord;
}

std::vector<int> DeviceGrid::group(int64_t rank, int axis) const {
  std::array<int64_t, 3> coord = coordOf(rank);
  std::vector<int> ranks;
  for (int64_t k = 0; k < size[axis]; ++k) {
    coord[axis] = k;
    ranks.push_back(static_cast<int>(rankOf(coord)));
  }
  return ranks;
}

std::optional<std::vector<int>>
DeviceGrid::group(int64_t rank, const std::string &name) const {
  if (name == "dp")
    return group(rank, kDataAxis);
  if (name == "pp")
    return group(rank, kPipelineAxis);
  if (name == "tp")
    return group(rank, kTensorAxis);
  if (name != "dp_shard" && name != "dp_replica")
    return std::nullopt;
  // Along D: coordinate d is shard d % S of replica group d / S.
  std::array<int64_t, 3> coord = coordOf(rank);
  int64_t s = shardRanks(), d = coord[kDataAxis];
  std::vector<int> ranks;
  for (int64_t k = 0; k < (name == "dp_shard" ? s : size[kDataAxis] / s); ++k) {
    coord[kDataAxis] = name == "dp_shard" ? d / s * s + k : k * s + d % s;
    ranks.push_back(static_cast<int>(rankOf(coord)));
  }
  return ranks;
}

} // namespace smp
