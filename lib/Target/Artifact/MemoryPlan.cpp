//===- MemoryPlan.cpp - Static arena layout from live ranges --------------===//
//
// Three offline layouts, the smallest arena wins:
//  - first fit by start: ranges in program order, each at the lowest offset
//    free for its whole life;
//  - greedy by size and greedy by breadth (Pisarchyk and Lee, "Efficient
//    Memory Management for Deep Neural Net Inference", 2020; TFLite's arena
//    planner): ranges taken largest first, or those live at the widest
//    instants first, each in the gap among the ranges already placed and
//    live at the same time that fits it most tightly.
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

/// Places the ranges in `order`, each in the tightest gap among the ranges
/// already placed and live at the same time (else above them all).
MemoryPlan greedyInOrder(const std::vector<LiveRange> &ranges,
                         const std::vector<size_t> &order, uint64_t alignment) {
  MemoryPlan plan;
  plan.offsets.assign(ranges.size(), 0);
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


/// Largest first (TFLite's greedy by size).
std::vector<size_t> orderBySize(const std::vector<LiveRange> &ranges) {
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranges[a].bytes != ranges[b].bytes)
      return ranges[a].bytes > ranges[b].bytes;
    return ranges[a].start < ranges[b].start;
  });
  return order;
}

/// Greedy by breadth (Pisarchyk and Lee): the instants with the most bytes
/// live first, and at each the ranges live there not yet placed, largest
/// first. A range is taken at the widest instant of its life: ordered by
/// that breadth, then the instant, then size.
std::vector<size_t> orderByBreadth(const std::vector<LiveRange> &ranges,
                                   uint64_t alignment) {
  if (ranges.empty())
    return {};
  // Instants from the first start (-1: weights, inputs) to one past the last.
  int64_t first = ranges[0].start, last = ranges[0].start;
  for (const LiveRange &r : ranges) {
    first = std::min(first, r.start);
    last = std::max(last, r.start);
  }
  size_t n = static_cast<size_t>(last - first) + 2;
  std::vector<int64_t> breadth(n, 0);
  auto startAt = [&](const LiveRange &r) {
    return static_cast<size_t>(r.start - first);
  };
  auto endAt = [&](const LiveRange &r) { // clamped: "forever" is past last
    return static_cast<size_t>(std::min<int64_t>(endOf(r), last + 1) - first);
  };
  for (const LiveRange &r : ranges) {
    int64_t size =
        static_cast<int64_t>(alignUp(std::max<uint64_t>(r.bytes, 1), alignment));
    breadth[startAt(r)] += size;
    if (endAt(r) + 1 < n)
      breadth[endAt(r) + 1] -= size;
  }
  for (size_t t = 1; t < n; ++t)
    breadth[t] += breadth[t - 1];
  // Sparse table of (breadth, -instant) maxima over ranges of instants.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> table(1);
  table[0].resize(n);
  for (size_t t = 0; t < n; ++t)
    table[0][t] = {breadth[t], -static_cast<int64_t>(t)};
  for (size_t k = 1; (size_t(1) << k) <= n; ++k) {
    const auto &prev = table[k - 1];
    std::vector<std::pair<int64_t, int64_t>> row(n - (size_t(1) << k) + 1);
    for (size_t t = 0; t < row.size(); ++t)
      row[t] = std::max(prev[t], prev[t + (size_t(1) << (k - 1))]);
    table.push_back(std::move(row));
  }
  auto widest = [&](size_t lo, size_t hi) { // inclusive
    size_t k = 0;
    while ((size_t(2) << k) <= hi - lo + 1)
      ++k;
    return std::max(table[k][lo], table[k][hi - (size_t(1) << k) + 1]);
  };
  std::vector<std::pair<int64_t, int64_t>> key(ranges.size());
  for (size_t i = 0; i < ranges.size(); ++i)
    key[i] = widest(startAt(ranges[i]), endAt(ranges[i]));
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (key[a] != key[b])
      return key[a] > key[b];
    return ranges[a].bytes > ranges[b].bytes;
  });
  return order;
}

/// Largest bytes x lifetime first.
std::vector<size_t> orderByArea(const std::vector<LiveRange> &ranges) {
  int64_t last = 0;
  for (const LiveRange &r : ranges)
    last = std::max(last, r.start);
  auto area = [&](const LiveRange &r) {
    return double(r.bytes) * double(std::min<int64_t>(endOf(r), last + 1) - r.start + 1);
  };
  std::vector<size_t> order(ranges.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return area(ranges[a]) > area(ranges[b]);
  });
  return order;
}

} // namespace

namespace {
/// The most bytes live at once: a lower bound of any layout's arena.
uint64_t peakLive(const std::vector<LiveRange> &ranges, uint64_t alignment) {
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
  uint64_t peak = 0;
  for (const auto &[t, delta] : events) {
    liveBytes += delta;
    peak = std::max(peak, static_cast<uint64_t>(std::max<int64_t>(liveBytes, 0)));
  }
  return peak;
}

/// Iterated greedy: after each layout, the ranges that reach its top are
/// placed first in the next one; stops at the lower bound or after a few
/// rounds without a smaller arena.
void iterateGreedy(const std::vector<LiveRange> &ranges,
                   std::vector<size_t> order, uint64_t alignment,
                   MemoryPlan &best) {
  constexpr int kRounds = 16, kPatience = 4;
  for (int round = 0, stale = 0;
       round < kRounds && stale < kPatience &&
       best.arenaBytes > best.peakLiveBytes;
       ++round) {
    MemoryPlan greedy = greedyInOrder(ranges, order, alignment);
    if (greedy.arenaBytes < best.arenaBytes) {
      greedy.peakLiveBytes = best.peakLiveBytes;
      best = std::move(greedy);
      stale = 0;
    } else {
      ++stale;
    }
    const MemoryPlan &last = stale ? greedy : best;
    std::vector<size_t> top, rest;
    for (size_t idx : order) {
      uint64_t size = alignUp(std::max<uint64_t>(ranges[idx].bytes, 1), alignment);
      (last.offsets[idx] + size == last.arenaBytes ? top : rest).push_back(idx);
    }
    if (top.empty() || rest.empty())
      return;
    top.insert(top.end(), rest.begin(), rest.end());
    order = std::move(top);
  }
}
} // namespace

MemoryPlan planMemory(const std::vector<LiveRange> &ranges,
                      uint64_t alignment) {
  MemoryPlan plan = firstFitByStart(ranges, alignment);
  plan.peakLiveBytes = peakLive(ranges, alignment);
  for (const std::vector<size_t> &order :
       {orderBySize(ranges), orderByBreadth(ranges, alignment),
        orderByArea(ranges)})
    iterateGreedy(ranges, order, alignment, plan);
  return plan;
}

} // namespace smp
