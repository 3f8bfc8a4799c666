//===- StagePartition.h - Cutting a model into pipeline stages -*- C++ -*-===//
//
// One candidate plan's stages: the ops' times and memory at a micro-batch
// size (Stages, shared by every candidate of that shape) and the contiguous
// stages whose slowest is fastest within the memory cap (Evaluator), found
// by bisecting on the slowest stage's time with a greedy feasibility check.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_PLANNER_STAGEPARTITION_H
#define SMP_LIB_PLANNER_STAGEPARTITION_H

#include "PlannerInternal.h"

#include "smp/Planner/Planner.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace smp {
namespace planning {

/// One tensor-parallel degree's profile with the micro-batch's op times,
/// and the sums a stage's time and memory are read from.
struct Stages {
  const ModelProfile &profile;
  const DeviceSpec &device;
  int64_t b;                                                 // micro-batch size
  std::vector<double> fwd, saved, params, tpComm, tpCommBwd; // per op
  std::vector<size_t> cuts; // ops a stage may end after

  // Sums over ops [0, i) (a range's is the difference of two): F + B of
  // one micro-batch, the same with the forward recomputed, the saved
  // activations, the parameters and the recomputation checkpoints.
  std::vector<double> prefixTime, prefixTimeRc, prefixSaved, prefixParams,
      prefixCheckpoints;
  double largestSegment = 0; // activations of the largest recompute segment
  /// ZeRO-3's gathered bytes per f32 byte of the parameters: the copies are
  /// in the type their uses compute in (smp-shard-parameters casts the
  /// chunk before its gather: bf16 under mixed precision, about a half),
  /// from the profile's forward and backward copies (ModelProfile::
  /// ParamCopy) against two of every parameter; once per profile and
  /// micro-batch size, not per priced plan.
  double gatherWidth = 1;
  RangeMax largestParams;    // of params (ZeRO-3 asks for a range's largest)

  Stages(const ModelProfile &profile, const DeviceSpec &device, int64_t b);

  /// F + B of one micro-batch of ops [begin, end) (and, offloaded, the
  /// activations' way out and back).
  double time(size_t begin, size_t end, bool rc, bool offload) const {
    double t = rc ? prefixTimeRc[end] - prefixTimeRc[begin]
                  : prefixTime[end] - prefixTime[begin];
    if (offload && device.hostBandwidth > 0)
      t += 2 * backwardReads(begin, end, rc) / device.hostBandwidth;
    return t;
  }
  /// What the backward reads of one micro-batch's stage: its activations,
  /// or with recomputation the checkpoints.
  double backwardReads(size_t begin, size_t end, bool rc) const {
    if (!rc)
      return prefixSaved[end] - prefixSaved[begin];
    return prefixCheckpoints[end] - prefixCheckpoints[begin] +
           (begin == 0 ? 0 : profile.ops[begin - 1].boundaryBytes * b);
  }
  /// The slowest single op's time(i, i + 1, rc, offload): no stage is
  /// faster.
  double slowestOp(bool rc, bool offload) const {
    return slowestOps[rc][offload];
  }

private:
  void prefixSums();
  double slowestOps[2][2] = {{0, 0}, {0, 0}};
};

struct Candidate {
  int64_t tp, pp, dp, b, m;
  int zero;      // the ZeRO stage
  int recompute; // 0 none, 1 every stage, 2 the stages that need it
  bool offload;  // saved activations to host memory and back
  /// The ranks a ZeRO chunk is split over: dp, or a hybrid-sharding group.
  int64_t shard;
};

struct Partition {
  bool ok = false;
  std::vector<size_t> ends;               // last op of each stage
  std::vector<double> time;               // F + B of one micro-batch, per stage
  std::vector<double> memory;             // per rank
  std::vector<MemoryBreakdown> breakdown; // the same, by kind
  std::vector<bool> recompute;            // per stage
};

/// A stage's gradient bytes at its peak under ZeRO `stage` over `dp` ranks
/// with `microbatches` a step: whole, or (scattersGradients) this rank's
/// chunks plus two buckets of `bucketBytes` in flight.
double shardedGradientBytes(double params, int stage, int64_t dp,
                            int64_t microbatches, double bucketBytes);

/// In-flight micro-batches of stage s.
double inflight(const std::string &schedule, int64_t s, int64_t p, int64_t m,
                int64_t v);

/// A candidate's stages: where they end, their times and memory.
class Evaluator {
public:
  Evaluator(const Stages &st, const PlanRequest &req, const Candidate &c,
            const std::string &schedule, int64_t v);

  bool sequenceParallel() const { return st.profile.sequenceParallel; }

  /// F + B of one micro-batch of ops [begin, end) (and the offloaded
  /// activations' way out and back).
  double time(size_t begin, size_t end, bool rc) const {
    return st.time(begin, end, rc, c.offload);
  }

  /// Whether ops [begin, end) fit as stage s within `limit` and `cap`:
  /// without recomputation when allowed and enough, else with it.
  std::optional<bool> fits(size_t begin, size_t end, int64_t s, double limit,
                           double cap) const;

  double memory(size_t begin, size_t end, int64_t s, bool rc) const {
    return breakdown(begin, end, s, rc).total();
  }
  MemoryBreakdown breakdown(size_t begin, size_t end, int64_t s, bool rc) const;

  /// The stages with the fastest slowest one whose memory fits `cap`.
  Partition partition(double cap) const;

  const Stages &st;
  const PlanRequest &req;
  Candidate c;
  std::string schedule;
  int64_t v;
  std::vector<double> inflightOf; // in-flight micro-batches, per stage
  double stateFactor;             // optimizer state bytes per parameter byte

private:
  std::optional<size_t> longestFit(size_t begin, size_t cut, int64_t s,
                                   double limit, double cap) const;
  Partition greedy(double limit, double cap) const;
  Partition measured(Partition part) const;
  double slowest(const Partition &part) const;
};

} // namespace planning
} // namespace smp

#endif // SMP_LIB_PLANNER_STAGEPARTITION_H
