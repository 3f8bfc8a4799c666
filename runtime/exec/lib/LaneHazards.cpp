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
  size_t joinComm = 0, joinCopy = 0; // a lane's entries before these end
  for (size_t n = 0; n < pending_.size(); ++n) {
    const Pending &p = pending_[n];
    if (p.lane == lane || !conflicts(*p.access, access))
      continue;
    waits.push_back(p.id);
    (p.lane == Lane::Comm ? joinComm : joinCopy) = n + 1;
  }
  if (lane == Lane::Compute && !waits.empty()) {
    size_t n = 0;
    for (size_t m = 0; m < pending_.size(); ++m) {
      const Pending &p = pending_[m];
      if (m >= (p.lane == Lane::Comm ? joinComm : joinCopy))
        pending_[n++] = p;
    }
    pending_.resize(n);
  }
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
