//===- MemoryPlan.cpp - Static arena layout from live ranges --------------===//
//
// Two offline layouts, the smaller arena wins:
//  - first fit by start: ranges in program order, each at the lowest offset
//    free for its whole life;
//  - greedy by size (Pisarchyk and Lee, "Efficient Memory Management for
//    Deep Neural Net Inference", 2020; TFLite's arena planner): the largest
//    ranges first, each in the gap among the ranges already placed and live
//    at the same time that fits it most tightly.
// Both are checked against the lower bound, the most bytes live at once.
//
//===----------------------------------------------------------------------===//

#include "smp/Target/Artifact/MemoryPlan.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace smp {
namespace {

struct Placed {
  uint64_t offset, bytes;
  int64_t start, end;
};

uint64_t alignUp(uint64_t v, uint64_t alignment) {
  return (v + alignment - 1) / alignment * alignment;
}

int64_t endOf(const LiveRange &r) { return std::max(r.end, r.start); }

MemoryPlan firstFitByStart(const std::vector<LiveRange> &ranges,
                           uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(ranges.size(), 0);
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranges[a].start != ranges[b].start)
      return ranges[a].start < ranges[b].start;
    return ranges[a].bytes > ranges[b].bytes;
  });
  std::vector<Placed> live; // placed ranges still live, sorted by offset
  for (size_t idx : order) {
    const LiveRange &r = ranges[idx];
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const Placed &p) { return p.end < r.start; }),
               live.end());
    uint64_t size = alignUp(std::max<uint64_t>(r.bytes, 1), alignment);
    uint64_t offset = 0;
    for (const Placed &p : live) {
      if (offset + size <= p.offset)
        break;
      offset = std::max(offset, alignUp(p.offset + p.bytes, alignment));
    }
    plan.offsets[idx] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
    auto pos = std::lower_bound(
        live.begin(), live.end(), offset,
        [](const Placed &p, uint64_t o) { return p.offset < o; });
    live.insert(pos, Placed{offset, size, r.start, endOf(r)});
  }
  return plan;
}

MemoryPlan greedyBySize(const std::vector<LiveRange> &ranges,
                        uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(ranges.size(), 0);
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranges[a].bytes != ranges[b].bytes)
      return ranges[a].bytes > ranges[b].bytes;
    return ranges[a].start < ranges[b].start;
  });
  std::vector<Placed> placed; // sorted by offset
  std::vector<const Placed *> overlapping;
  for (size_t idx : order) {
    const LiveRange &r = ranges[idx];
    uint64_t size = alignUp(std::max<uint64_t>(r.bytes, 1), alignment);
    int64_t start = r.start, end = endOf(r);
    // The tightest gap between ranges live at the same time, else the top.
    uint64_t offset = 0, best = UINT64_MAX, bestGap = UINT64_MAX;
    for (const Placed &p : placed) {
      if (p.end < start || p.start > end)
        continue;
      if (p.offset >= offset) {
        uint64_t gap = p.offset - offset;
        if (gap >= size && gap < bestGap) {
          bestGap = gap;
          best = offset;
        }
      }
      offset = std::max(offset, alignUp(p.offset + p.bytes, alignment));
    }
    if (best == UINT64_MAX)
      best = offset;
    plan.offsets[idx] = best;
    plan.arenaBytes = std::max(plan.arenaBytes, best + size);
    auto pos = std::lower_bound(
        placed.begin(), placed.end(), best,
        [](const Placed &p, uint64_t o) { return p.offset < o; });
    placed.insert(pos, Placed{best, size, start, end});
  }
  return plan;
}

} // namespace

MemoryPlan planMemory(const std::vector<LiveRange> &ranges,
                      uint64_t alignment) {
  MemoryPlan bySize = greedyBySize(ranges, alignment);
  MemoryPlan byStart = firstFitByStart(ranges, alignment);
  MemoryPlan plan =
      bySize.arenaBytes <= byStart.arenaBytes ? std::move(bySize)
                                              : std::move(byStart);
  // The most bytes live at once: a lower bound of any layout's arena.
  std::vector<std::pair<int64_t, int64_t>> events; // (time, +/- bytes)
  for (const LiveRange &r : ranges) {
    int64_t size = static_cast<int64_t>(
        alignUp(std::max<uint64_t>(r.bytes, 1), alignment));
    events.push_back({r.start, size});
    if (endOf(r) < std::numeric_limits<int64_t>::max()) // else: to the end
      events.push_back({endOf(r) + 1, -size});
  }
  std::sort(events.begin(), events.end());
  int64_t liveBytes = 0;
  for (const auto &[t, delta] : events) {
    liveBytes += delta;
    plan.peakLiveBytes = std::max(
        plan.peakLiveBytes, static_cast<uint64_t>(std::max<int64_t>(liveBytes, 0)));
  }
  return plan;
}

} // namespace smp
