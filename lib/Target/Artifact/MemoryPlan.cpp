//===- MemoryPlan.cpp - Static arena layout from live ranges --------------===//

#include "smp/Target/Artifact/MemoryPlan.h"

#include <algorithm>
#include <numeric>

namespace smp {

MemoryPlan planMemory(const std::vector<LiveRange> &ranges,
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
  auto align = [&](uint64_t v) {
    return (v + alignment - 1) / alignment * alignment;
  };
  // Placed ranges still live, sorted by offset.
  struct Placed {
    uint64_t offset, bytes;
    int64_t end;
  };
  std::vector<Placed> live;
  for (size_t idx : order) {
    const LiveRange &r = ranges[idx];
    live.erase(std::remove_if(live.begin(), live.end(),
                              [&](const Placed &p) { return p.end < r.start; }),
               live.end());
    uint64_t size = align(std::max<uint64_t>(r.bytes, 1));
    uint64_t offset = 0;
    for (const Placed &p : live) { // sorted by offset
      if (offset + size <= p.offset)
        break;
      offset = std::max(offset, align(p.offset + p.bytes));
    }
    plan.offsets[idx] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
    auto pos = std::lower_bound(
        live.begin(), live.end(), offset,
        [](const Placed &p, uint64_t o) { return p.offset < o; });
    live.insert(pos, Placed{offset, size, r.end});
  }
  return plan;
}

} // namespace smp
