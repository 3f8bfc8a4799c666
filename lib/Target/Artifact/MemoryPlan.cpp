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
// Cost: ranges live for the whole program (weights, inputs, state) are
// stacked at the bottom first (no loss: see planMemory); first fit keeps
// the live blocks in a treap that finds the lowest fitting gap in
// O(log n); the greedy layouts look only at the ranges live at the same
// time (a segment tree over instants), within a fixed budget of overlaps.
// A 100k-node chain plans in well under a second (it was quadratic).
//
//===----------------------------------------------------------------------===//

#include "smp/Target/Artifact/MemoryPlan.h"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <utility>
#include <numeric>
#include <optional>

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

/// The first and the last start of non-empty `ranges`.
std::pair<int64_t, int64_t> startSpan(const std::vector<LiveRange> &ranges) {
  int64_t first = ranges[0].start, last = ranges[0].start;
  for (const LiveRange &r : ranges) {
    first = std::min(first, r.start);
    last = std::max(last, r.start);
  }
  return {first, last};
}

/// Disjoint blocks [offset, end) of the arena ordered by offset (a treap),
/// each subtree knowing its first offset, its last end and the largest gap
/// between its blocks: the lowest gap that fits a size is found in
/// O(log n) instead of by a scan over every live block (which made first
/// fit quadratic when many buffers live long, such as gradients).
class FreeGapIndex {
public:
  FreeGapIndex() : nodes(1) {}

  void insert(uint64_t offset, uint64_t end) {
    auto [lo, hi] = split(rootNode, offset);
    uint32_t n = static_cast<uint32_t>(nodes.size());
    nodes.push_back(Node{offset, end, nextPriority(), 0, 0, offset, end, 0});
    rootNode = merge(merge(lo, n), hi);
  }

  void erase(uint64_t offset) {
    auto [lo, rest] = split(rootNode, offset);
    auto [mid, hi] = split(rest, offset + 1);
    (void)mid; // its node is leaked into `nodes` until the index goes away
    rootNode = merge(lo, hi);
  }

  /// The lowest offset where `size` bytes fit between the blocks (or above
  /// them all).
  uint64_t firstFit(uint64_t size) const {
    uint64_t prevEnd = 0;
    for (uint32_t t = rootNode; t;) {
      const Node &n = nodes[t];
      if (n.left) {
        const Node &l = nodes[n.left];
        if (l.first - prevEnd >= size || l.gap >= size) {
          t = n.left;
          continue;
        }
        prevEnd = l.last;
      }
      if (n.offset - prevEnd >= size)
        return prevEnd;
      prevEnd = n.end;
      t = n.right;
    }
    return prevEnd;
  }

private:
  struct Node {
    uint64_t offset, end;
    uint32_t priority, left, right;
    uint64_t first, last, gap; // of the subtree
  };

  uint32_t nextPriority() {
    seed ^= seed << 13;
    seed ^= seed >> 17;
    seed ^= seed << 5;
    return seed;
  }

  void pull(uint32_t t) {
    Node &n = nodes[t];
    n.first = n.offset;
    n.last = n.end;
    n.gap = 0;
    if (n.left) {
      const Node &l = nodes[n.left];
      n.first = l.first;
      n.gap = std::max({n.gap, l.gap, n.offset - l.last});
    }
    if (n.right) {
      const Node &r = nodes[n.right];
      n.last = r.last;
      n.gap = std::max({n.gap, r.gap, r.first - n.end});
    }
  }

  /// Splits into the blocks at offsets < key and >= key.
  std::pair<uint32_t, uint32_t> split(uint32_t t, uint64_t key) {
    if (!t)
      return {0, 0};
    if (nodes[t].offset < key) {
      auto [lo, hi] = split(nodes[t].right, key);
      nodes[t].right = lo;
      pull(t);
      return {t, hi};
    }
    auto [lo, hi] = split(nodes[t].left, key);
    nodes[t].left = hi;
    pull(t);
    return {lo, t};
  }

  uint32_t merge(uint32_t a, uint32_t b) {
    if (!a || !b)
      return a ? a : b;
    if (nodes[a].priority > nodes[b].priority) {
      nodes[a].right = merge(nodes[a].right, b);
      pull(a);
      return a;
    }
    nodes[b].left = merge(a, nodes[b].left);
    pull(b);
    return b;
  }

  std::vector<Node> nodes; // nodes[0] is "none"
  uint32_t rootNode = 0;
  uint32_t seed = 2463534242u; // fixed: the same layout on every run
};

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
  // The placed ranges still live (all live at the current start, so their
  // blocks are disjoint), and when each dies.
  FreeGapIndex live;
  std::priority_queue<std::pair<int64_t, uint64_t>,
                      std::vector<std::pair<int64_t, uint64_t>>,
                      std::greater<>>
      deaths; // (end, offset)
  for (size_t idx : order) {
    const LiveRange &r = ranges[idx];
    while (!deaths.empty() && deaths.top().first < r.start) {
      live.erase(deaths.top().second);
      deaths.pop();
    }
    uint64_t size = plannedBytes(r, alignment);
    uint64_t offset = live.firstFit(size);
    plan.offsets[idx] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
    live.insert(offset, offset + size);
    deaths.push({endOf(r), offset});
  }
  return plan;
}

/// The ranges placed so far, found by the instants they are live at: a
/// segment tree over the instants holds each range in the O(log T) nodes
/// that cover its life (a stabbing query at instant s yields the ranges live
/// at s), and a map by start yields those starting in (s, e]. Together: the
/// ranges live at some instant of [s, e], without looking at the others
/// (the scan over every placed range made the greedy layouts quadratic).
class PlacedByTime {
public:
  PlacedByTime(int64_t first, int64_t last)
      : first(first), size(static_cast<size_t>(last - first) + 1) {
    size_t cap = 1;
    while (cap < size)
      cap *= 2;
    nodes.resize(2 * cap);
    leaves = cap;
  }
  /// Range `id` is live at instants [s, e] (clamped to [first, last]).
  void insert(uint32_t id, int64_t s, int64_t e) {
    insertAt(1, 0, leaves - 1, index(s), index(e), id);
    byStart[s].push_back(id);
  }
  /// Appends every inserted range live at some instant of [s, e].
  void overlapping(int64_t s, int64_t e, std::vector<uint32_t> &out) const {
    for (size_t node = 1, lo = 0, hi = leaves - 1, at = index(s);;) {
      out.insert(out.end(), nodes[node].begin(), nodes[node].end());
      if (lo == hi)
        break;
      size_t mid = (lo + hi) / 2;
      if (at <= mid) {
        node = 2 * node;
        hi = mid;
      } else {
        node = 2 * node + 1;
        lo = mid + 1;
      }
    }
    for (auto it = byStart.upper_bound(s); it != byStart.end() && it->first <= e;
         ++it)
      out.insert(out.end(), it->second.begin(), it->second.end());
  }

private:
  size_t index(int64_t t) const {
    return static_cast<size_t>(
        std::clamp<int64_t>(t - first, 0, static_cast<int64_t>(size) - 1));
  }
  void insertAt(size_t node, size_t lo, size_t hi, size_t s, size_t e,
                uint32_t id) {
    if (e < lo || hi < s)
      return;
    if (s <= lo && hi <= e) {
      nodes[node].push_back(id);
      return;
    }
    size_t mid = (lo + hi) / 2;
    insertAt(2 * node, lo, mid, s, e, id);
    insertAt(2 * node + 1, mid + 1, hi, s, e, id);
  }
  int64_t first;
  size_t size, leaves = 1;
  std::vector<std::vector<uint32_t>> nodes;
  std::map<int64_t, std::vector<uint32_t>> byStart;
};

/// Places the ranges in `order`, each in the tightest gap among the ranges
/// already placed and live at the same time (else above them all). Each
/// range looks at those it overlaps, which is quadratic when many ranges
/// live long: `budget` bounds the overlaps looked at over all layouts, and a
/// layout that would exceed it is abandoned (nullopt). Counted, not timed:
/// the same input gives the same plan on any machine.
std::optional<MemoryPlan> greedyInOrder(const std::vector<LiveRange> &ranges,
                                        const std::vector<size_t> &order,
                                        uint64_t alignment, uint64_t &budget) {
  MemoryPlan plan;
  plan.offsets.assign(ranges.size(), 0);
  if (ranges.empty())
    return plan;
  auto [first, last] = startSpan(ranges);
  // Instants past the last start change no overlap: ends are clamped there.
  PlacedByTime placed(first, last);
  std::vector<Placed> info(ranges.size());
  std::vector<uint32_t> overlapping;
  for (size_t idx : order) {
    const LiveRange &r = ranges[idx];
    uint64_t size = plannedBytes(r, alignment);
    int64_t start = r.start, end = std::min(endOf(r), last);
    overlapping.clear();
    placed.overlapping(start, end, overlapping);
    if (overlapping.size() > budget)
      return std::nullopt;
    budget -= overlapping.size();
    std::sort(overlapping.begin(), overlapping.end(),
              [&](uint32_t a, uint32_t b) {
                return info[a].offset < info[b].offset;
              });
    // The tightest gap between ranges live at the same time, else the top.
    uint64_t offset = 0, best = UINT64_MAX, bestGap = UINT64_MAX;
    for (uint32_t other : overlapping) {
      const Placed &p = info[other];
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
    info[idx] = Placed{best, size, start, end};
    placed.insert(static_cast<uint32_t>(idx), start, end);
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
    int64_t size = static_cast<int64_t>(plannedBytes(r, alignment));
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
/// The most bytes live at once, a lower bound of any layout's arena, into
/// `plan` (peakLiveBytes, and the first instant with them, peakLiveAt).
void peakLive(const std::vector<LiveRange> &ranges, uint64_t alignment,
              MemoryPlan &plan) {
  std::vector<std::pair<int64_t, int64_t>> events; // (time, +/- bytes)
  for (const LiveRange &r : ranges) {
    auto size = static_cast<int64_t>(plannedBytes(r, alignment));
    events.push_back({r.start, size});
    if (endOf(r) < std::numeric_limits<int64_t>::max()) // else: to the end
      events.push_back({endOf(r) + 1, -size});
  }
  std::sort(events.begin(), events.end());
  int64_t liveBytes = 0;
  plan.peakLiveBytes = 0;
  for (const auto &[t, delta] : events) {
    liveBytes += delta;
    if (liveBytes > static_cast<int64_t>(plan.peakLiveBytes)) {
      plan.peakLiveBytes = static_cast<uint64_t>(liveBytes);
      plan.peakLiveAt = t;
    }
  }
}

/// Iterated greedy: after each layout, the ranges that reach its top are
/// placed first in the next one; stops at the lower bound or after a few
/// rounds without a smaller arena.
void iterateGreedy(const std::vector<LiveRange> &ranges,
                   std::vector<size_t> order, uint64_t alignment,
                   MemoryPlan &best, uint64_t &budget) {
  constexpr int kRounds = 16, kPatience = 4;
  for (int round = 0, stale = 0;
       round < kRounds && stale < kPatience &&
       best.arenaBytes > best.peakLiveBytes;
       ++round) {
    std::optional<MemoryPlan> layout =
        greedyInOrder(ranges, order, alignment, budget);
    if (!layout)
      return;
    MemoryPlan greedy = std::move(*layout);
    if (greedy.arenaBytes < best.arenaBytes) {
      greedy.peakLiveBytes = best.peakLiveBytes;
      greedy.peakLiveAt = best.peakLiveAt;
      best = std::move(greedy);
      stale = 0;
    } else {
      ++stale;
    }
    const MemoryPlan &last = stale ? greedy : best;
    std::vector<size_t> top, rest;
    for (size_t idx : order) {
      uint64_t size = plannedBytes(ranges[idx], alignment);
      (last.offsets[idx] + size == last.arenaBytes ? top : rest).push_back(idx);
    }
    if (top.empty() || rest.empty())
      return;
    top.insert(top.end(), rest.begin(), rest.end());
    order = std::move(top);
  }
}

/// Overlaps the greedy layouts may look at, all rounds together (about a
/// second of work); first fit alone is O(n log n).
constexpr uint64_t kGreedyBudget = uint64_t(1) << 27;

/// Plans the ranges that are not live for the whole program.
MemoryPlan planTransient(const std::vector<LiveRange> &ranges,
                         uint64_t alignment) {
  MemoryPlan plan = firstFitByStart(ranges, alignment);
  peakLive(ranges, alignment, plan);
  uint64_t budget = kGreedyBudget;
  for (const std::vector<size_t> &order :
       {orderBySize(ranges), orderByBreadth(ranges, alignment),
        orderByArea(ranges)})
    iterateGreedy(ranges, order, alignment, plan, budget);
  return plan;
}
} // namespace

MemoryPlan planMemory(const std::vector<LiveRange> &ranges,
                      uint64_t alignment) {
  // A range live at every instant (weights, inputs, optimizer state: from
  // the first start to past the last) is a horizontal stripe of any layout:
  // every other range lies wholly below or above it, so cutting it out
  // leaves a layout of the others that is smaller by its size. Stacking
  // these ranges at the bottom and planning the others above them therefore
  // loses nothing, and keeps the layouts from scanning them for every range
  // (first fit kept them in its live list: quadratic in the parameters).
  MemoryPlan plan;
  plan.offsets.assign(ranges.size(), 0);
  if (ranges.empty())
    return plan;
  auto [first, last] = startSpan(ranges);
  std::vector<size_t> permanent, transient;
  for (size_t i = 0; i < ranges.size(); ++i)
    (ranges[i].start == first && endOf(ranges[i]) >= last ? permanent
                                                          : transient)
        .push_back(i);
  // Largest first, as first fit by start placed them.
  std::stable_sort(permanent.begin(), permanent.end(), [&](size_t a, size_t b) {
    return ranges[a].bytes > ranges[b].bytes;
  });
  uint64_t base = 0;
  for (size_t i : permanent) {
    plan.offsets[i] = base;
    base += plannedBytes(ranges[i], alignment);
  }
  std::vector<LiveRange> rest;
  rest.reserve(transient.size());
  for (size_t i : transient)
    rest.push_back(ranges[i]);
  MemoryPlan above = planTransient(rest, alignment);
  for (size_t k = 0; k < transient.size(); ++k)
    plan.offsets[transient[k]] = base + above.offsets[k];
  plan.arenaBytes = base + above.arenaBytes;
  plan.peakLiveBytes = base + above.peakLiveBytes;
  // The permanent ranges are live at every instant.
  plan.peakLiveAt = transient.empty() ? first : above.peakLiveAt;
  return plan;
}

uint64_t plannedBytes(const LiveRange &range, uint64_t alignment) {
  return alignUp(std::max<uint64_t>(range.bytes, 1), alignment);
}

} // namespace smp
