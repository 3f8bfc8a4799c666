//===- DeviceGrid.h - The dp x pp x tp grid and its placement --*- C++ -*-===//
//
// A plan runs on dp * pp * tp ranks. Each rank has a coordinate (d, p, t);
// the placement orders the axes from slowest to fastest varying, as in
// SageMaker's model-parallel library: "cluster" = DPT (tensor-parallel
// peers get adjacent ranks, then pipeline stages), "spread" = TPD
// (data-parallel replicas adjacent), or any order of the letters D, P, T.
// Under hybrid sharding the D axis is itself [dp / S, S]: ZeRO shards over
// the S consecutive data-parallel coordinates of a group and replicates
// across the groups. Pure C++17, no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_TARGET_ARTIFACT_DEVICEGRID_H
#define SMP_TARGET_ARTIFACT_DEVICEGRID_H

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace smp {

enum GridAxis { kDataAxis = 0, kPipelineAxis = 1, kTensorAxis = 2 };

struct DeviceGrid {
  /// Sizes along D, P, T.
  std::array<int64_t, 3> size{1, 1, 1};
  /// The axes from slowest to fastest varying (a permutation of 0, 1, 2).
  std::array<int, 3> order{kDataAxis, kPipelineAxis, kTensorAxis};
  /// Hybrid sharding's group size S along D (0: one group of all of D).
  int64_t dpShard = 0;

  /// The ranks a ZeRO chunk is split over.
  int64_t shardRanks() const { return dpShard > 0 ? dpShard : size[kDataAxis]; }

  /// "cluster", "spread" or three distinct letters of D, P, T; nullopt for
  /// anything else.
  static std::optional<std::array<int, 3>> parsePlacement(const std::string &s);
  /// The placement as letters, e.g. "DPT".
  std::string placementLetters() const;

  int64_t numRanks() const { return size[0] * size[1] * size[2]; }
  int64_t rankOf(const std::array<int64_t, 3> &coord) const;
  std::array<int64_t, 3> coordOf(int64_t rank) const;
  /// The ranks that share `rank`'s coordinates but along `axis`, in order of
  /// their coordinate on it (a collective's group).
  std::vector<int> group(int64_t rank, int axis) const;
  /// The group of a collective over grid `name` ("dp", "pp", "tp", and
  /// under hybrid sharding "dp_shard", "dp_replica"), or nullopt for an
  /// unknown name.
  std::optional<std::vector<int>> group(int64_t rank,
                                        const std::string &name) const;
};

} // namespace smp

#endif // SMP_TARGET_ARTIFACT_DEVICEGRID_H
