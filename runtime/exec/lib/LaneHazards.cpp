//===- LaneHazards.cpp - Which side-stream work a step must wait for ------===//

#include "smprt/exec/LaneHazards.h"

namespace smprt {

const char *laneName(Lane lane) {
  switch (lane) {
  case Lane::Compute:
    return "compute";
  case Lane::Comm:
    return "communication";
  case Lane::Copy:
    return "copy";
  }
  return "?";
}

namespace {

bool intersect(const std::vector<ByteRange> &a,
               const std::vector<ByteRange> &b) {
  for (const ByteRange &x : a)
    for (const ByteRange &y : b)
      if (x.pool == y.pool && x.begin < y.end && y.begin < x.end)
        return true;
  return false;
}

} // namespace

bool conflicts(const Access &a, const Access &b) {
  return intersect(a.writes, b.writes) || intersect(a.writes, b.reads) ||
         intersect(a.reads, b.writes);
}

std::vector<size_t> LaneHazards::before(Lane lane, const Access &access) {
  std::vector<size_t> waits;
  // A side step the compute stream waits for has ended, and so has every
  // step queued before it on its lane: none of them is pending after.
  std::vector<bool> joined(pending_.size(), false);
  for (size_t n = 0; n < pending_.size(); ++n) {
    const Pending &p = pending_[n];
    if (p.lane == lane || !conflicts(*p.access, access))
      continue;
    waits.push_back(p.id);
    if (lane == Lane::Compute)
      for (size_t m = 0; m <= n; ++m)
        joined[m] = joined[m] || pending_[m].lane == p.lane;
  }
  std::vector<Pending> kept;
  for (size_t n = 0; n < pending_.size(); ++n)
    if (!joined[n])
      kept.push_back(pending_[n]);
  pending_ = std::move(kept);
  return waits;
}

void LaneHazards::queued(size_t id, Lane lane, const Access &access) {
  pending_.push_back({id, lane, &access});
}

std::vector<size_t> LaneHazards::drain() {
  std::vector<size_t> ids;
  for (const Pending &p : pending_)
    ids.push_back(p.id);
  pending_.clear();
  return ids;
}

} // namespace smprt
