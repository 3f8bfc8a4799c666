//===- MemoryPlan.h - Static arena layout from live ranges ------*- C++ -*-===//

#ifndef SMP_TARGET_ARTIFACT_MEMORYPLAN_H
#define SMP_TARGET_ARTIFACT_MEMORYPLAN_H

#include <cstdint>
#include <vector>

namespace smp {

/// A buffer that is live from instruction `start` to `end` inclusive.
struct LiveRange {
  int64_t start;
  int64_t end;
  uint64_t bytes;
};

struct MemoryPlan {
  std::vector<uint64_t> offsets; // one per LiveRange
  uint64_t arenaBytes = 0;
  /// The most bytes live at once (aligned): what a perfect layout needs.
  uint64_t peakLiveBytes = 0;
  /// An instant with that many bytes live (the first; -1 without ranges).
  int64_t peakLiveAt = -1;
};

/// The bytes `range` takes in a plan with `alignment` (what peakLiveBytes
/// counts).
uint64_t plannedBytes(const LiveRange &range, uint64_t alignment = 64);

/// Places every range in one arena so that ranges live at the same time never
/// overlap: the smallest of first fit in program order and greedy placement
/// (each range in the tightest gap among those live with it) in three
/// orders (largest first, widest instant first, bytes x lifetime), each
/// iterated (the ranges reaching the top go first next round) until the
/// arena meets the lower bound or stops shrinking.
MemoryPlan planMemory(const std::vector<LiveRange> &ranges,
                      uint64_t alignment = 64);

} // namespace smp

#endif // SMP_TARGET_ARTIFACT_MEMORYPLAN_H
