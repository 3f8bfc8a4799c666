//===- StagePartition.cpp - Cutting a model into pipeline stages ---------===//

#include "StagePartition.h"

#include "smp/Analysis/Cost/CostModel.h"

#include <algorithm>
#include <limits>

namespace smp {
namespace planning {

Stages::Stages(const ModelProfile &profile, const DeviceSpec &device, int64_t b)
    : profile(profile), device(device), b(b) {
  int64_t tp = profile.tp;
  for (size_t i = 0; i < profile.ops.size(); ++i) {
    const OpProfile &o = profile.ops[i];
    OpCost c;
    c.flops = o.flops * b;
    c.bytesRead = o.batchBytes * b + o.fixedBytes;
    c.matrix = o.matrix;
    // The forward's collective and the backward's: an all-reduce's
    // gradient is free but the region's tp_copy entry all-reduces (the
    // same bytes); a reduce_scatter's gradient all-gathers; an
    // all_gather's reduce-scatters and gathers the rows again.
    auto time = [&](Collective kind) {
      return o.tpCommBytes > 0
                 ? groupCollectiveTime(kind, o.tpCommBytes * b,
                                       static_cast<int>(tp),
                                       device.devicesPerNode, device)
                 : 0.0;
    };
    double comm = time(o.tpCollective == 0   ? Collective::AllReduce
                       : o.tpCollective == 1 ? Collective::ReduceScatter
                                             : Collective::AllGather);
    fwd.push_back(rooflineTime(c, o.bits, device));
    tpComm.push_back(comm);
    tpCommBwd.push_back(o.tpCollective == 2 ? time(Collective::ReduceScatter) +
                                                  time(Collective::AllGather)
                                            : comm);
    saved.push_back(o.savedBytes * b);
    params.push_back(o.paramBytes);
    if (o.cutAfter)
      cuts.push_back(i);
  }
  double gathered = 0;
  for (const ModelProfile::ParamCopy &c : profile.step(false, false).copies)
    gathered += c.bytes;
  if (gathered > 0 && profile.totalParamBytes > 0)
    gatherWidth = std::min(1.0, gathered / (2 * profile.totalParamBytes));
  prefixSums();
}

void Stages::prefixSums() {
  size_t n = fwd.size();
  prefixTime.assign(n + 1, 0);
  prefixTimeRc.assign(n + 1, 0);
  prefixSaved.assign(n + 1, 0);
  prefixParams.assign(n + 1, 0);
  prefixCheckpoints.assign(n + 1, 0);
  double segment = 0;
  for (size_t i = 0; i < n; ++i) {
    // Full recomputation keeps what crosses each cut point (the next
    // segment's input) and recomputes one segment at a time.
    const OpProfile &o = profile.ops[i];
    prefixCheckpoints[i + 1] =
        prefixCheckpoints[i] + (o.cutAfter ? o.boundaryBytes * b : 0);
    segment += saved[i];
    largestSegment = std::max(largestSegment, segment);
    if (o.cutAfter)
      segment = 0;
    double f = fwd[i] + tpComm[i];
    double bwd = 2 * fwd[i] + tpCommBwd[i];
    prefixTime[i + 1] = prefixTime[i] + f + bwd;
    prefixTimeRc[i + 1] = prefixTimeRc[i] + f + bwd + f;
    prefixSaved[i + 1] = prefixSaved[i] + saved[i];
    prefixParams[i + 1] = prefixParams[i] + params[i];
  }
  largestParams = RangeMax(params);
  for (bool rc : {false, true})
    for (bool offload : {false, true})
      for (size_t i = 0; i < n; ++i)
        slowestOps[rc][offload] =
            std::max(slowestOps[rc][offload], time(i, i + 1, rc, offload));
}

/// A stage's gradient bytes at its peak under ZeRO `stage` over `dp` ranks:
/// whole, or (ZeRO-2) this rank's chunks plus the buckets in flight.
double shardedGradientBytes(double params, int stage, int64_t dp,
                            int64_t microbatches, double bucketBytes) {
  // ZeRO-3 shards the gradients as ZeRO-2 does, and so does ZeRO-1 with one
  // micro-batch (its buckets are scattered as the backward makes them).
  if (!scattersGradients(stage, microbatches))
    return params;
  return params / static_cast<double>(dp) + std::min(params, 2 * bucketBytes);
}

/// In-flight micro-batches of stage s.
double inflight(const std::string &schedule, int64_t s, int64_t p, int64_t m,
                int64_t v) {
  if (schedule == "gpipe")
    return static_cast<double>(m);
  double base = std::min<double>(p - s, m);
  if (schedule == "interleaved")
    base *= 1.0 + (p - 1.0) / (p * static_cast<double>(v));
  return base;
}

Evaluator::Evaluator(const Stages &st, const PlanRequest &req,
                     const Candidate &c, const std::string &schedule, int64_t v)
    : st(st), req(req), c(c), schedule(schedule), v(v),
      stateFactor(optimizerStateFactor(req.optimizer)) {
  for (int64_t s = 0; s < c.pp; ++s)
    inflightOf.push_back(inflight(schedule, s, c.pp, c.m, v));
}

/// Whether ops [begin, end) fit as stage s within `limit` and `cap`:
/// without recomputation when allowed and enough, else with it.
std::optional<bool> Evaluator::fits(size_t begin, size_t end, int64_t s,
                                    double limit, double cap) const {
  for (bool rc : {false, true}) {
    if ((rc && c.recompute == 0) || (!rc && c.recompute == 1))
      continue;
    if (time(begin, end, rc) <= limit && memory(begin, end, s, rc) <= cap)
      return rc;
  }
  return std::nullopt;
}

MemoryBreakdown Evaluator::breakdown(size_t begin, size_t end, int64_t s,
                                     bool rc) const {
  double params = st.prefixParams[end] - st.prefixParams[begin];
  double state = params * stateFactor;
  if (c.zero)
    state /= static_cast<double>(c.shard);
  // ZeRO-3 stores 1/S of the parameters and gathers one op's at a time
  // (two: the next is gathered while the last one's copy dies).
  double stored = params;
  if (c.zero == 3 && end > begin)
    stored = params / static_cast<double>(c.shard) +
             std::min(params, 2 * st.largestParams.max(begin, end));
  double activations = st.prefixSaved[end] - st.prefixSaved[begin];
  double checkpoints =
      st.prefixCheckpoints[end] - st.prefixCheckpoints[begin] +
      (begin == 0 ? 0 : st.profile.ops[begin - 1].boundaryBytes * st.b);
  double held = rc ? inflightOf[s] * checkpoints +
                         std::min(st.largestSegment, activations)
                   : inflightOf[s] * activations;
  if (c.offload) // what is in flight lives in host memory; a segment's
                 // worth is back on the device at a time
    held = std::min(st.largestSegment, activations) * (rc ? 2 : 1);
  double workspace =
      (st.profile.transientBytes > 0 ? st.profile.transientBytes
                                     : 2 * st.profile.maxTempBytes) *
      st.b;
  // parameters + gradients (as many bytes, ZeRO-2 a chunk) + state + held
  // + workspace.
  return {stored,
          shardedGradientBytes(params, c.zero, c.shard, c.m, req.bucketBytes),
          state, held, workspace};
}

/// The cut point (an index into st.cuts, from `cut` on) ending the longest
/// run of ops from `begin` that fits as stage s, leaving a cut point for
/// each later stage; none when not even the first fits. A run's time and
/// memory grow with its end, so the runs that fit are a prefix of the
/// cut points: galloping then bisecting finds its end in O(log length)
/// fits() calls (a linear scan made pricing a 128-stage pipeline slow).
std::optional<size_t> Evaluator::longestFit(size_t begin, size_t cut, int64_t s,
                                            double limit, double cap) const {
  size_t n = st.fwd.size();
  size_t reserve = static_cast<size_t>(c.pp - 1 - s - 1);
  if (st.cuts.size() <= reserve)
    return std::nullopt;
  size_t first = cut, stop = st.cuts.size() - reserve;
  while (first < stop && st.cuts[first] + 1 <= begin)
    ++first;
  while (stop > first && st.cuts[stop - 1] + 1 >= n)
    --stop;
  auto ok = [&](size_t k) {
    return fits(begin, st.cuts[k] + 1, s, limit, cap).has_value();
  };
  if (first >= stop || !ok(first))
    return std::nullopt;
  size_t good = first, bad = stop; // ok(good); none from bad on
  for (size_t step = 1; good + step < bad; step *= 2) {
    if (!ok(good + step)) {
      bad = good + step;
      break;
    }
    good += step;
  }
  while (bad - good > 1) {
    size_t mid = good + (bad - good) / 2;
    (ok(mid) ? good : bad) = mid;
  }
  return good;
}

/// The stages whose slowest is at most `limit` and whose memory fits.
Partition Evaluator::greedy(double limit, double cap) const {
  Partition part;
  size_t n = st.fwd.size(), begin = 0, cut = 0;
  for (int64_t s = 0; s < c.pp; ++s) {
    bool last = s == c.pp - 1;
    size_t end = begin;
    if (last) {
      end = n;
    } else {
      std::optional<size_t> k = longestFit(begin, cut, s, limit, cap);
      if (!k)
        return part;
      end = st.cuts[*k] + 1;
      cut = *k + 1;
    }
    std::optional<bool> rc =
        end > begin ? fits(begin, end, s, limit, cap) : std::nullopt;
    if (!rc)
      return part;
    part.ends.push_back(end - 1);
    part.recompute.push_back(*rc);
    begin = end;
  }
  part.ok = begin == n;
  return part;
}

/// The slowest stage of a partition greedy() found.
double Evaluator::slowest(const Partition &part) const {
  double t = 0;
  for (size_t s = 0, begin = 0; s < part.ends.size(); ++s) {
    t = std::max(t, time(begin, part.ends[s] + 1, part.recompute[s]));
    begin = part.ends[s] + 1;
  }
  return t;
}

/// Fills the stages' times and memory of a partition greedy() found (the
/// bisection only needs where the stages end).
Partition Evaluator::measured(Partition part) const {
  for (size_t s = 0, begin = 0; s < part.ends.size(); ++s) {
    size_t end = part.ends[s] + 1;
    bool rc = part.recompute[s];
    part.time.push_back(time(begin, end, rc));
    part.breakdown.push_back(breakdown(begin, end, s, rc));
    part.memory.push_back(part.breakdown.back().total());
    begin = end;
  }
  return part;
}

Partition Evaluator::partition(double cap) const {
  size_t n = st.fwd.size();
  if (c.pp == 1) {
    Partition p;
    std::optional<bool> rc =
        fits(0, n, 0, std::numeric_limits<double>::infinity(), cap);
    bool r = rc.value_or(c.recompute == 1);
    p.ends = {n - 1};
    p.time = {time(0, n, r)};
    p.memory = {memory(0, n, 0, r)};
    p.recompute = {r};
    p.ok = rc.has_value();
    return p;
  }
  if (static_cast<int64_t>(st.cuts.size()) < c.pp - 1)
    return Partition();
  double lo = st.slowestOp(c.recompute == 1, c.offload), hi = time(0, n, true);
  Partition best = greedy(hi, cap);
  if (!best.ok)
    return best;
  // greedy(limit) succeeds for every limit at least the slowest stage of a
  // partition it found under a larger limit (each of those stages still
  // fits, so each stage of the new one ends no earlier, and the last one
  // takes a part of the old last one): such a limit only moves `hi`, and
  // only the last successful limit's partition is kept, so greedy runs for
  // it once, after the loop (about half of the greedy() calls of a deep
  // pipeline's search; the same partitions).
  double reached = slowest(best);
  std::optional<double> pending; // a limit greedy() succeeds at, not run
  for (int iter = 0; iter < 40 && hi - lo > 1e-9 * hi; ++iter) {
    double mid = 0.5 * (lo + hi);
    if (mid >= reached) {
      pending = mid;
      hi = mid;
      continue;
    }
    Partition p = greedy(mid, cap);
    if (p.ok) {
      reached = slowest(p);
      best = std::move(p);
      pending.reset();
      hi = mid;
    } else {
      lo = mid;
    }
  }
  if (pending) {
    Partition p = greedy(*pending, cap);
    if (p.ok)
      best = std::move(p);
  }
  return measured(std::move(best));
}

} // namespace planning
} // namespace smp
