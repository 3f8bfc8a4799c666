//===- LaneHazards.h - Which side-stream work waits for which --*- C++ -*-===//
//
// A device backend queues communication (collectives, pipeline messages)
// and offload copies on side streams (Step::lane), so that they run while
// the compute stream goes on with work that does not need them: a bucket's
// gradient all-reduce during the rest of the backward, as PyTorch's DDP
// does. The executor orders the lanes with events, from the byte ranges
// each instruction reads and writes (its operands' places in the arena or
// the host pool):
//
//   * a side step starts after everything queued on the compute stream
//     before it (an event recorded there): what it reads has been written,
//     and what it writes has been read;
//   * a later step on another lane whose ranges conflict with a pending
//     side step's (it writes what the side step reads or writes, or reads
//     what it writes) waits for the side step's end first; once the
//     compute stream has waited for it, everything after is ordered behind
//     it and it is no longer pending;
//   * at the run's end the compute stream waits for every side step still
//     pending, so that waiting for the compute stream waits for them all.
//
// Two side steps of one lane are ordered by their stream. LaneHazards
// tracks the pending side steps; the executor owns the events.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_EXEC_LANEHAZARDS_H
#define SMPRT_EXEC_LANEHAZARDS_H

#include "smprt/exec/Backend.h"

#include <cstdint>
#include <vector>

namespace smprt {

/// Bytes [begin, end) of one memory: pool 0 the device arena, 1 the host
/// pool (the artifact's Buffer::pool).
struct ByteRange {
  uint32_t pool = 0;
  uint64_t begin = 0, end = 0;
};

/// What one instruction reads (its inputs) and writes (its outputs).
struct Access {
  std::vector<ByteRange> reads, writes;
};

/// Whether running `a` and `b` in either order, or at once, could change
/// what they compute: one writes bytes the other reads or writes.
bool conflicts(const Access &a, const Access &b);

class LaneHazards {
public:
  /// Before a step of `lane` touching `access` is queued: the ids of the
  /// pending side steps of the other lanes it conflicts with, which its
  /// stream must wait for. Those a compute step waits for are no longer
  /// pending.
  std::vector<size_t> before(Lane lane, const Access &access);
  /// A side step (`id`, its lane and access) was queued and its end
  /// recorded: pending until the compute stream waits for it.
  void queued(size_t id, Lane lane, const Access &access);
  /// The side steps still pending, which the compute stream must wait for
  /// at the run's end; none is pending after.
  std::vector<size_t> drain();
  bool empty() const { return pending_.empty(); }

private:
  struct Pending {
    size_t id;
    Lane lane;
    const Access *access; // the executor's, alive while pending
  };
  std::vector<Pending> pending_;
};

} // namespace smprt

#endif // SMPRT_EXEC_LANEHAZARDS_H
