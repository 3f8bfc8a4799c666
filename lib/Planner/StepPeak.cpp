//===- StepPeak.cpp - A stage's memory peak from the step's live ranges ---===//
//
// stepPeak: the most bytes live at once in a stage's part of the training
// step (the profile's values as events in step order, gradients kept whole,
// accumulated or scattered into ZeRO-2 buckets, ZeRO-3's parameter copies);
// stageSavedBytes: what a stage keeps for its backward per micro-batch.
// The values come from the profile's liveness sweep (ModelProfile.cpp).
//
//===----------------------------------------------------------------------===//

#include "smp/Planner/Planner.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <climits>

namespace smp {

/// Accumulated 16-bit gradients of the stage's [begin, end): in make order,
/// groups of up to kAccumulationGroupBytes of f32 sums (smp-multi-tensor's
/// add_multis); each gradient is live until its group's op, at the group's
/// last make, which sums in place.
static llvm::DenseMap<const ModelProfile::StepValue *, int32_t>
accumulationGroups(const std::vector<ModelProfile::StepValue> &values,
                   size_t begin, size_t end, double b) {
  std::vector<const ModelProfile::StepValue *> half;
  for (const ModelProfile::StepValue &v : values)
    if (v.gradient && v.halfWidth && v.anchor >= static_cast<int32_t>(begin) &&
        v.anchor < static_cast<int32_t>(end))
      half.push_back(&v);
  std::stable_sort(half.begin(), half.end(),
                   [](auto *x, auto *y) { return x->def < y->def; });
  llvm::DenseMap<const ModelProfile::StepValue *, int32_t> summedAt;
  double sums = 0;
  size_t first = 0;
  for (size_t k = 0; k < half.size(); ++k) {
    sums += 2 * (half[k]->fixed + half[k]->perSample * b);
    if (sums < static_cast<double>(kAccumulationGroupBytes) &&
        k + 1 < half.size())
      continue;
    for (size_t j = first; j <= k; ++j)
      summedAt[half[j]] = half[k]->def;
    first = k + 1;
    sums = 0;
  }
  return summedAt;
}

StepPeak stepPeak(const std::vector<ModelProfile::StepValue> &values,
                  size_t begin, size_t end, double b,
                  const StepPeakOptions &options) {
  GradientLifetime gradients = options.gradients;
  double bucketBytes = options.bucketBytes;
  const ShardedParameters *sharded = options.sharded;
  double chunkFraction = options.chunkFraction;
  const std::vector<ModelProfile::ParamCopy> *copies =
      sharded ? sharded->copies : nullptr;
  // (time, bytes, kind: 0 gradient, 1 saved, 2 other, 3 gathered)
  struct Event {
    int32_t at;
    double bytes;
    int kind;
    bool operator<(const Event &o) const {
      return at != o.at ? at < o.at : bytes < o.bytes;
    }
  };
  std::vector<Event> events;
  auto inStage = [&](int32_t anchor) {
    return anchor >= static_cast<int32_t>(begin) &&
           anchor < static_cast<int32_t>(end);
  };
  // ZeRO-2: the whole gradients (those that outlive the backward: the
  // optimizer reads them; the parts are summed within it) fall, in the
  // order they are made, into buckets of up to `bucketBytes`; each lives
  // until its bucket's last is made, when the bucket is packed (a copy of
  // it, until its reduce-scatter) and scattered; its chunk stays to the end.
  // Accumulated with buckets: the running sums are packed likewise after
  // the add of the bucket's last (for one op: the sums die as the packed
  // copy takes their place).
  llvm::DenseMap<const ModelProfile::StepValue *, int32_t> until;
  bool packs = gradients == GradientLifetime::Scattered ||
               (gradients == GradientLifetime::Accumulated && bucketBytes > 0);
  if (packs) {
    bool scattered = gradients == GradientLifetime::Scattered;
    int32_t backwardEnd = 0;
    std::vector<const ModelProfile::StepValue *> whole;
    for (const ModelProfile::StepValue &v : values)
      if (v.gradient && inStage(v.anchor))
        backwardEnd = std::max(backwardEnd, v.def);
    for (const ModelProfile::StepValue &v : values)
      if (v.gradient && inStage(v.anchor) && v.last > backwardEnd)
        whole.push_back(&v);
    std::stable_sort(whole.begin(), whole.end(),
                     [](auto *x, auto *y) { return x->def < y->def; });
    double bytes = 0;
    std::vector<const ModelProfile::StepValue *> bucket;
    auto close = [&] {
      if (bucket.empty())
        return;
      int32_t last = bucket.back()->def + (scattered ? 0 : 1);
      if (scattered)
        for (auto *v : bucket)
          until[v] = last;
      if (bucket.size() > 1) {
        events.push_back({last, bytes, 0});
        events.push_back({last + 1, -bytes, 0});
      }
      if (chunkFraction > 0)
        events.push_back({last + 1, bytes * chunkFraction, 0});
      bucket.clear();
      bytes = 0;
    };
    for (auto *v : whole) {
      // The running sums are f32 (a bf16 or f16 gradient's twice its size).
      double size =
          (v->fixed + v->perSample * b) * (!scattered && v->halfWidth ? 2 : 1);
      if (!bucket.empty() && bytes + size > bucketBytes)
        close();
      bucket.push_back(v);
      bytes += size;
    }
    close();
  }
  llvm::DenseMap<const ModelProfile::StepValue *, int32_t> summedAt;
  if (gradients == GradientLifetime::Accumulated)
    summedAt = accumulationGroups(values, begin, end, b);
  if (copies) {
    // Copy k (in first-use order) is gathered at the first use of copy
    // k - prefetch (smp-shard-parameters).
    size_t ahead = static_cast<size_t>(std::max<int64_t>(sharded->prefetch, 0));
    for (size_t k = 0; k < copies->size(); ++k) {
      const ModelProfile::ParamCopy &c = (*copies)[k];
      if (!inStage(c.anchor))
        continue;
      events.push_back(
          {(*copies)[k >= ahead ? k - ahead : 0].first, c.bytes, 3});
      events.push_back({c.last + 1, -c.bytes, 3});
    }
  }
  for (const ModelProfile::StepValue &v : values) {
    if (v.weightOnly && copies && !v.narrowedParam)
      continue;
    double bytes = v.fixed + v.perSample * b;
    if (v.weightOnly && copies)
      bytes *= sharded->fraction; // the chunk's cast
    if (v.gradient && gradients == GradientLifetime::Accumulated) {
      if (!inStage(v.anchor))
        continue;
      // A 16-bit gradient until its group's sums (in place); an f32 one
      // with its new sum, at the add.
      auto at = summedAt.find(&v);
      bool half = at != summedAt.end();
      double live = half ? bytes : 2 * bytes;
      events.push_back({v.def, live, 0});
      events.push_back({(half ? at->second : v.def) + 1, -live, 0});
      continue;
    }
    int kind = v.gradient ? 0 : v.saved ? 1 : 2;
    if (options.sharedCasts && v.narrowedParam && v.forward && !copies) {
      if (inStage(v.anchor))
        events.push_back({0, bytes, kind}); // to the end of the step
      continue;
    }
    if (inStage(v.anchor)) {
      auto scattered = until.find(&v);
      events.push_back({v.def, bytes, kind});
      events.push_back(
          {scattered != until.end() ? scattered->second + 1 : v.last + 1,
           -bytes, kind});
      continue;
    }
    // Made on another stage, read here: received, held from its first use
    // here to its last.
    int32_t first = INT32_MAX, last = -1;
    for (auto [at, anchor] : v.foreignUses)
      if (inStage(anchor)) {
        first = std::min(first, at);
        last = std::max(last, at);
      }
    if (last >= 0) {
      events.push_back({first, bytes, kind});
      events.push_back({last + 1, -bytes, kind});
    }
  }
  std::sort(events.begin(), events.end());
  // The total is summed in event order alone (as the planner always has);
  // the kinds beside it only say what the peak is made of.
  double live = 0, kinds[4] = {0, 0, 0, 0};
  StepPeak peak;
  for (const Event &e : events) {
    live += e.bytes;
    kinds[e.kind] += e.bytes;
    if (live > peak.total)
      peak = {live, kinds[0], kinds[1], kinds[2], kinds[3]};
  }
  return peak;
}

double stageSavedBytes(const std::vector<ModelProfile::StepValue> &values,
                       size_t begin, size_t end, double b) {
  double saved = 0;
  for (const ModelProfile::StepValue &v : values)
    if (v.saved && v.anchor >= static_cast<int32_t>(begin) &&
        v.anchor < static_cast<int32_t>(end))
      saved += v.perSample * b; // weights kept for the backward are shared
  return saved;
}

} // namespace smp
