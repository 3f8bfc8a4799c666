//===- Planner.cpp - Choose dp x tp x pp, micro-batches, schedule ---------===//
//
// The search: tp over the divisors of the devices within a node (those the
// model's heads allow), pp over the divisors of what is left (up to the cut
// points), dp the rest; the micro-batch size over the divisors of each
// replica's batch; recomputation on or off; ZeRO stage 0, 1 or 2; the
// schedules. For each (tp, pp, micro-batch, recompute, ZeRO) the stages are
// cut by binary
// search on the slowest stage's time with a greedy feasibility check (each
// stage takes the longest run of ops whose time and memory fit), which is
// exact for contiguous stages because both limits only grow with a stage.
//
// Time of a step, from the cost model:
//   pipeline     m (F + B) / (1 - bubble), F and B the slowest stage's forward
//                and backward of one micro-batch (B = 2F, + F when
//                recomputing), bubble the schedule's (lib/Schedule), plus the
//                activations and gradients sent between stages
//   data parallel  the gradient all-reduce of the largest stage (exposed;
//                hierarchical when a replica group has several devices
//                per node: the cluster placement puts tp x pp innermost);
//                ZeRO-2: a reduce-scatter per micro-batch and the
//                parameters' all-gather
//   optimizer    streaming the parameters, gradients and state once
// Memory of a rank of stage s: parameters, gradients (f32; ZeRO-2: /dp plus
// two buckets in flight), optimizer state (/dp with ZeRO-1 and 2),
// activations of the micro-batches in flight (1F1B and
// ZB-H1: min(p - s, m); GPipe: m; interleaved: x (1 + (p-1)/(p v))); with
// recomputation only the stage's input per micro-batch plus one micro-
// batch's activations; and a workspace of the largest temporary.
//
//===----------------------------------------------------------------------===//

#include "smp/Planner/Planner.h"

#include "PlannerInternal.h"

#include "mlir/IR/BuiltinOps.h"
#include "smp/Analysis/Cost/CostModel.h"
#include "smp/Schedule/PipelineSchedule.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace smp {
namespace {

/// Whether the search may offload activations: pinned, or the device has a
/// host link.
bool offloads(const PlanRequest &req) {
  return req.offload ? *req.offload : req.device.hostBandwidth > 0;
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k * k <= n; ++k)
    if (n % k == 0) {
      d.push_back(k);
      if (k != n / k)
        d.push_back(n / k);
    }
  std::sort(d.begin(), d.end());
  return d;
}


/// One tensor-parallel degree's profile with the micro-batch's op times.
/// The profiles by (tensor-parallel degree, sequence parallelism).
using ProfileKey = std::pair<int64_t, bool>;
using Profiles = std::map<ProfileKey, ModelProfile>;

struct Stages {
  const ModelProfile &profile;
  const DeviceSpec &device;
  int64_t b; // micro-batch size
  std::vector<double> fwd, saved, params, tpComm, tpCommBwd; // per op
  std::vector<size_t> cuts;                       // ops a stage may end after

  Stages(const ModelProfile &profile, const DeviceSpec &device, int64_t b)
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
      tpCommBwd.push_back(o.tpCollective == 2
                              ? time(Collective::ReduceScatter) +
                                    time(Collective::AllGather)
                              : comm);
      saved.push_back(o.savedBytes * b);
      params.push_back(o.paramBytes);
      if (o.cutAfter)
        cuts.push_back(i);
    }
  }
};

/// A stage's gradient bytes at its peak under ZeRO `stage` over `dp` ranks:
/// whole, or (ZeRO-2) this rank's chunks plus the buckets in flight.
double shardedGradientBytes(double params, int stage, int64_t dp) {
  // ZeRO-3 shards the gradients as ZeRO-2 does.
  if (stage < 2)
    return params;
  return params / static_cast<double>(dp) + std::min(params, 2 * kBucketBytes);
}

struct Candidate {
  int64_t tp, pp, dp, b, m;
  int zero; // the ZeRO stage
  int recompute; // 0 none, 1 every stage, 2 the stages that need it
  bool offload;  // saved activations to host memory and back
  /// The ranks a ZeRO chunk is split over: dp, or a hybrid-sharding group.
  int64_t shard;
};

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

struct Partition {
  bool ok = false;
  std::vector<size_t> ends;   // last op of each stage
  std::vector<double> time;   // F + B of one micro-batch, per stage
  std::vector<double> memory; // per rank
  std::vector<MemoryBreakdown> breakdown; // the same, by kind
  std::vector<bool> recompute; // per stage
};

class Evaluator {
public:
  Evaluator(const Stages &st, const PlanRequest &req, const Candidate &c,
            const std::string &schedule, int64_t v)
      : st(st), req(req), c(c), schedule(schedule), v(v) {
    size_t n = st.fwd.size();
    prefixTime.assign(n + 1, 0);
    prefixTimeRc.assign(n + 1, 0);
    prefixSaved.assign(n + 1, 0);
    prefixParams.assign(n + 1, 0);
    prefixCheckpoints.assign(n + 1, 0);
    double segment = 0;
    for (size_t i = 0; i < n; ++i) {
      // Full recomputation keeps what crosses each cut point (the next
      // segment's input) and recomputes one segment at a time.
      const OpProfile &o = st.profile.ops[i];
      prefixCheckpoints[i + 1] =
          prefixCheckpoints[i] + (o.cutAfter ? o.boundaryBytes * st.b : 0);
      segment += st.saved[i];
      largestSegment = std::max(largestSegment, segment);
      if (o.cutAfter)
        segment = 0;
      double f = st.fwd[i] + st.tpComm[i];
      double bwd = 2 * st.fwd[i] + st.tpCommBwd[i];
      prefixTime[i + 1] = prefixTime[i] + f + bwd;
      prefixTimeRc[i + 1] = prefixTimeRc[i] + f + bwd + f;
      prefixSaved[i + 1] = prefixSaved[i] + st.saved[i];
      prefixParams[i + 1] = prefixParams[i] + st.params[i];
    }
    // ZeRO-3 asks for the largest op's parameters of every range it prices.
    if (c.zero == 3)
      largestParams = RangeMax(st.params);
  }

  bool sequenceParallel() const { return st.profile.sequenceParallel; }

  double time(size_t begin, size_t end, bool rc) const {
    double t = rc ? prefixTimeRc[end] - prefixTimeRc[begin]
                  : prefixTime[end] - prefixTime[begin];
    if (c.offload && st.device.hostBandwidth > 0)
      t += 2 * saved(begin, end, rc) / st.device.hostBandwidth; // out and back
    return t;
  }

  /// What the backward reads of one micro-batch's stage: its activations,
  /// or with recomputation the checkpoints.
  double saved(size_t begin, size_t end, bool rc) const {
    if (!rc)
      return prefixSaved[end] - prefixSaved[begin];
    return prefixCheckpoints[end] - prefixCheckpoints[begin] +
           (begin == 0 ? 0 : st.profile.ops[begin - 1].boundaryBytes * st.b);
  }

  /// Whether ops [begin, end) fit as stage s within `limit` and `cap`:
  /// without recomputation when allowed and enough, else with it.
  std::optional<bool> fits(size_t begin, size_t end, int64_t s, double limit,
                           double cap) const {
    for (bool rc : {false, true}) {
      if ((rc && c.recompute == 0) || (!rc && c.recompute == 1))
        continue;
      if (time(begin, end, rc) <= limit && memory(begin, end, s, rc) <= cap)
        return rc;
    }
    return std::nullopt;
  }

  double memory(size_t begin, size_t end, int64_t s, bool rc) const {
    return breakdown(begin, end, s, rc).total();
  }

  MemoryBreakdown breakdown(size_t begin, size_t end, int64_t s,
                            bool rc) const {
    double params = prefixParams[end] - prefixParams[begin];
    double state = params * optimizerStateFactor(req.optimizer);
    if (c.zero)
      state /= static_cast<double>(c.shard);
    // ZeRO-3 stores 1/S of the parameters and gathers one op's at a time
    // (two: the next is gathered while the last one's copy dies).
    double stored = params;
    if (c.zero == 3 && end > begin)
      stored = params / static_cast<double>(c.shard) +
               std::min(params, 2 * largestParams.max(begin, end));
    double activations = prefixSaved[end] - prefixSaved[begin];
    double checkpoints = prefixCheckpoints[end] - prefixCheckpoints[begin] +
                         (begin == 0 ? 0
                                     : st.profile.ops[begin - 1].boundaryBytes *
                                           st.b);
    double held = rc
                      ? inflight(schedule, s, c.pp, c.m, v) * checkpoints +
                            std::min(largestSegment, activations)
                      : inflight(schedule, s, c.pp, c.m, v) * activations;
    if (c.offload) // what is in flight lives in host memory; a segment's
                   // worth is back on the device at a time
      held = std::min(largestSegment, activations) * (rc ? 2 : 1);
    double workspace = (st.profile.transientBytes > 0
                            ? st.profile.transientBytes
                            : 2 * st.profile.maxTempBytes) *
                       st.b;
    // parameters + gradients (as many bytes, ZeRO-2 a chunk) + state + held
    // + workspace.
    return {stored, shardedGradientBytes(params, c.zero, c.shard), state, held,
            workspace};
  }

  /// The stages whose slowest is at most `limit` and whose memory fits.
  Partition greedy(double limit, double cap) const {
    Partition part;
    size_t n = st.fwd.size(), begin = 0, cut = 0;
    for (int64_t s = 0; s < c.pp; ++s) {
      bool last = s == c.pp - 1;
      size_t end = begin;
      if (last) {
        end = n;
      } else {
        // The longest run ending at a cut point that fits, leaving a cut
        // point for each later stage; at least one cut.
        size_t best = 0;
        bool found = false;
        size_t reserve = static_cast<size_t>(c.pp - 1 - s - 1);
        for (size_t k = cut; k + reserve < st.cuts.size(); ++k) {
          size_t e = st.cuts[k] + 1;
          if (e <= begin)
            continue;
          if (e >= n)
            break;
          if (!fits(begin, e, s, limit, cap))
            break;
          best = e;
          found = true;
          cut = k + 1;
        }
        if (!found)
          return part;
        end = best;
      }
      std::optional<bool> rc =
          end > begin ? fits(begin, end, s, limit, cap) : std::nullopt;
      if (!rc)
        return part;
      part.ends.push_back(end - 1);
      part.time.push_back(time(begin, end, *rc));
      part.breakdown.push_back(breakdown(begin, end, s, *rc));
      part.memory.push_back(part.breakdown.back().total());
      part.recompute.push_back(*rc);
      begin = end;
    }
    part.ok = begin == n;
    return part;
  }

  Partition partition(double cap) const {
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
    bool slow = c.recompute == 1;
    double lo = 0, hi = time(0, n, true);
    for (size_t i = 0; i < n; ++i)
      lo = std::max(lo, time(i, i + 1, slow));
    Partition best = greedy(hi, cap);
    if (!best.ok)
      return best;
    for (int iter = 0; iter < 40 && hi - lo > 1e-9 * hi; ++iter) {
      double mid = 0.5 * (lo + hi);
      Partition p = greedy(mid, cap);
      if (p.ok) {
        best = p;
        hi = mid;
      } else {
        lo = mid;
      }
    }
    return best;
  }

  const Stages &st;
  const PlanRequest &req;
  Candidate c;
  std::string schedule;
  int64_t v;
  std::vector<double> prefixTime, prefixTimeRc, prefixSaved, prefixParams,
      prefixCheckpoints;
  double largestSegment = 0; // activations of the largest recompute segment
  RangeMax largestParams; // of st.params (ZeRO-3 only)
};

bool crossNode(int64_t span, const DeviceSpec &d) {
  return span > d.devicesPerNode;
}


/// The profiles per tensor-parallel degree (within a node, dividing the
/// heads) and, for tp > 1, with and without sequence parallelism (unless
/// pinned); a degree the model cannot be split over adds a refusal.
void profilesPerTp(mlir::ModuleOp module, const PlanRequest &req,
                   const std::string &vocabOutput, const ModelProfile &base,
                   Profiles &profiles,
                   std::vector<std::string> &refusals) {
  const DeviceSpec &d = req.device;
  for (int64_t tp : divisors(req.devices)) {
    if (req.tp && tp != *req.tp)
      continue;
    if (!req.tp && tp > d.devicesPerNode)
      continue;
    if (tp == 1) {
      if (!req.sequenceParallel.value_or(false))
        profiles.emplace(ProfileKey{1, false}, base);
      continue;
    }
    for (bool sp : {false, true}) {
      if (req.sequenceParallel && *req.sequenceParallel != sp)
        continue;
      auto p = profileModel(module, tp, vocabOutput, d.fusesElementwise, sp,
                            req.precision, offloads(req));
      if (!p) {
        refusals.push_back("tp " + std::to_string(tp) +
                           (sp ? " with sequence parallelism: " : ": ") +
                           llvm::toString(p.takeError()));
        continue;
      }
      profiles.emplace(ProfileKey{tp, sp}, std::move(*p));
    }
  }
}

/// The schedules (name, virtual stages) a candidate may run: one stage runs
/// 1F1B; a pipeline any schedule, interleaved where its chunks fit.
std::vector<std::pair<std::string, int64_t>>
candidateSchedules(const Stages &st, const PlanRequest &req, int64_t pp,
                   int64_t m) {
  std::vector<std::pair<std::string, int64_t>> schedules;
  if (pp == 1) {
    schedules.push_back({"1f1b", 1});
  } else {
    for (const char *s : {"1f1b", "zb-h1", "gpipe"})
      schedules.push_back({s, 1});
    std::vector<int64_t> chunks = {2, 4};
    if (req.virtualStages && *req.virtualStages > 1)
      chunks = {*req.virtualStages};
    for (int64_t v : chunks)
      if (m % pp == 0 && static_cast<int64_t>(st.cuts.size()) >= pp * v - 1)
        schedules.push_back({"interleaved", v});
  }
  return schedules;
}

/// The sweep over every candidate plan: the plans that fit, and the
/// smallest of those that do not (for the error when none fits).
struct PlanSearch {
  const PlanRequest &req;
  const DeviceSpec &d;
  double cap;        // usable bytes per device
  double modelFlops; // per sample
  PlanResult &result;
  std::vector<Plan> plans;
  double smallestMemory = std::numeric_limits<double>::infinity();
  std::string smallestPlan;

  void sweep(Profiles &profiles) {
    for (auto &[key, profile] : profiles) {
      int64_t tp = key.first;
      for (int64_t pp : divisors(req.devices / tp)) {
        if (req.pp && pp != *req.pp)
          continue;
        int64_t dp = req.devices / (tp * pp);
        if (req.dp && dp != *req.dp)
          continue;
        if (req.globalBatch % dp != 0)
          continue;
        int64_t perReplica = req.globalBatch / dp;
        for (int64_t b : divisors(perReplica)) {
          if (req.microbatchSize ? b != *req.microbatchSize : b > 64)
            continue;
          int64_t m = perReplica / b;
          if (pp > 1 && m < pp && !req.microbatchSize)
            continue; // a pipeline needs micro-batches to fill it
          Stages st(profile, d, b);
          if (static_cast<int64_t>(st.cuts.size()) < pp - 1)
            continue;
          sweepOptions(st, tp, pp, dp, b, m);
        }
      }
    }
  }

  /// Recomputation, the ZeRO stage, offloading and the schedule for one shape.
  void sweepOptions(const Stages &st, int64_t tp, int64_t pp, int64_t dp,
                    int64_t b, int64_t m) {
    for (int recompute : {0, 1, 2}) {
      if (req.recompute && (recompute == 2 || (recompute == 1) != *req.recompute))
        continue;
      if (recompute == 2 && pp == 1)
        continue; // per stage is all or nothing with one stage
      for (int z = 0; z < 8; ++z) {
        int zero = z % 4;
        bool offload = z >= 4;
        if (zero > 0 && dp == 1)
          continue;
        if (req.zeroStage && zero != *req.zeroStage)
          continue;
        if (offload && !offloads(req))
          continue;
        if (req.offload && offload != *req.offload)
          continue;
        for (int64_t shard : shardGroups(dp, zero)) {
          Candidate c{tp, pp, dp, b, m, zero, recompute, offload, shard};
          for (auto &[schedule, v] : candidateSchedules(st, req, pp, m)) {
            if (req.schedule && *req.schedule != schedule)
              continue;
            if (req.virtualStages && *req.virtualStages != v)
              continue;
            ++result.plansPriced;
            price(st, c, schedule, v);
          }
        }
      }
    }
  }

  /// The ZeRO shard-group sizes to try over `dp` ranks (pinned: only that
  /// one): dp itself, and for ZeRO-3 hybrid sharding over the divisors of
  /// dp from 2 up. ZeRO-1 and 2 move the same bytes once per step either
  /// way, so they are searched over all of dp only (hybrid ones pinned).
  std::vector<int64_t> shardGroups(int64_t dp, int zero) const {
    if (zero == 0 || dp == 1)
      return {dp};
    if (req.shardedDp)
      return dp % *req.shardedDp == 0 ? std::vector<int64_t>{*req.shardedDp}
                                      : std::vector<int64_t>{};
    if (zero < 3)
      return {dp};
    std::vector<int64_t> groups;
    for (int64_t s : divisors(dp))
      if (s > 1)
        groups.push_back(s);
    return groups;
  }

  /// Remembers how close a candidate that does not fit came.
  void noteSmallest(Evaluator &ev, const Candidate &c,
                    const std::string &schedule, int64_t v) {
    Partition loose = ev.partition(std::numeric_limits<double>::infinity());
    if (!loose.ok)
      return;
    double peak = *std::max_element(loose.memory.begin(), loose.memory.end());
    if (peak < smallestMemory) {
      smallestMemory = peak;
      Plan p;
      p.dp = c.dp, p.tp = c.tp, p.pp = c.pp, p.microbatchSize = c.b,
      p.microbatches = c.m, p.schedule = schedule, p.zeroStage = c.zero,
      p.recompute = c.recompute != 0, p.virtualStages = v;
      p.shardedDp = c.shard < c.dp ? c.shard : 0;
      p.sequenceParallel = ev.sequenceParallel();
      p.offload = c.offload;
      p.stageRecompute = loose.recompute;
      smallestPlan = p.summary();
    }
  }

  /// Partitions and prices one candidate; keeps it if it fits.
  void price(const Stages &st, const Candidate &c, const std::string &schedule,
             int64_t v) {
    const ModelProfile &profile = st.profile;
    int64_t tp = c.tp, pp = c.pp, dp = c.dp, b = c.b, m = c.m;
    Evaluator ev(st, req, c, schedule, v);
    Partition part = ev.partition(cap);
    if (!part.ok) {
      noteSmallest(ev, c, schedule, v);
      return;
    }
    Plan p;
    p.dp = dp, p.tp = tp, p.pp = pp, p.microbatchSize = b,
    p.microbatches = m, p.schedule = schedule, p.zeroStage = c.zero,
    p.virtualStages = v;
    p.shardedDp = c.shard < dp ? c.shard : 0;
    p.sequenceParallel = st.profile.sequenceParallel;
    p.offload = c.offload;
    p.stageRecompute = part.recompute;
    p.recompute = llvm::any_of(part.recompute, [](bool r) { return r; });
    if (c.recompute == 2 &&
        (!p.recompute || llvm::all_of(part.recompute, [](bool r) { return r; })))
      return; // the same plan as "none" or "every stage"
    p.stageSeconds = part.time;
    p.stageEnds = part.ends;
    p.stageMemory = part.memory;
    p.stageBreakdown = part.breakdown;
    p.peakMemory = *std::max_element(part.memory.begin(), part.memory.end());
    for (size_t s = 0; s + 1 < part.ends.size(); ++s)
      p.cuts.push_back(profile.ops[part.ends[s] + 1].name.empty()
                           ? "op #" + std::to_string(part.ends[s] + 1)
                           : profile.ops[part.ends[s] + 1].name);
    double slowest = *std::max_element(part.time.begin(), part.time.end());
    double bubble = 0;
    if (pp > 1) {
      auto kind = *schedule::parseScheduleKind(schedule);
      bubble = schedule::unitCostBubbleFraction(
          kind, static_cast<int>(pp), static_cast<int>(m),
          static_cast<int>(v));
      if (bubble < 0)
        return;
    }
    // Activations forward and gradients back across every cut, on the
    // critical path once per stage of the fill/drain.
    double p2p = 0;
    for (size_t s = 0; s + 1 < part.ends.size(); ++s)
      p2p = std::max(p2p, collectiveTime(
                              Collective::P2P,
                              profile.ops[part.ends[s]].boundaryBytes * b, 2,
                              crossNode(tp * pp, d), d));
    p.bubble = bubble;
    p.pipelineSeconds = m * slowest / (1 - bubble) + 2 * (pp - 1) * v * p2p;
    double stageParams = 0;
    for (size_t s = 0, begin = 0; s < part.ends.size(); ++s) {
      stageParams = std::max(stageParams, ev.prefixParams[part.ends[s] + 1] -
                                              ev.prefixParams[begin]);
      begin = part.ends[s] + 1;
    }
    // The data-parallel ranks of a node (adjacent dp coordinates: the
    // placement puts tp and pp inside a node first).
    int64_t dpPerNode = std::max<int64_t>(1, d.devicesPerNode / (tp * pp));
    // ZeRO's collectives run within a shard group of S adjacent dp ranks
    // (all of dp unless hybrid sharding made groups).
    int64_t shard = c.zero > 0 ? c.shard : dp;
    auto collective = [&](Collective kind) {
      return groupCollectiveTime(kind, stageParams, static_cast<int>(shard),
                                 static_cast<int>(dpPerNode), d);
    };
    // ZeRO-2 reduce-scatters each micro-batch's gradients (then gathers the
    // parameters); ZeRO-3 also gathers the parameters for each micro-
    // batch's forward and backward (and recomputed forward), never after
    // the update; the others sum the accumulated gradients once.
    double gathers = 2 + (p.recompute ? 1 : 0);
    p.dataParallelSeconds =
        dp <= 1 ? 0
        : c.zero == 3
            ? m * (collective(Collective::ReduceScatter) +
                   gathers * collective(Collective::AllGather))
        : c.zero == 2 && m > 1
            ? m * collective(Collective::ReduceScatter) +
                  collective(Collective::AllGather)
            : collective(Collective::AllReduce);
    // Hybrid sharding: the chunks' sum over the dp / S replica groups, once
    // per step (a group's rank meets its peers S dp ranks apart).
    if (c.zero > 0 && shard < dp)
      p.dataParallelSeconds += groupCollectiveTime(
          Collective::AllReduce, stageParams / static_cast<double>(shard),
          static_cast<int>(dp / shard),
          static_cast<int>(std::max<int64_t>(1, dpPerNode / shard)), d);
    double touched = stageParams *
                     (3 + 2 * optimizerStateFactor(req.optimizer)) /
                     (c.zero > 0 ? shard : 1);
    p.optimizerSeconds = touched / d.memoryBandwidth;
    p.stepSeconds =
        p.pipelineSeconds + p.dataParallelSeconds + p.optimizerSeconds;
    p.samplesPerSecond = req.globalBatch / p.stepSeconds;
    double peak = profile.ops.empty()               ? 0
                  : profile.ops.front().bits <= 16 ? d.matrixFlops16
                                                   : d.matrixFlops32;
    p.mfu = 3 * modelFlops * req.globalBatch /
            (p.stepSeconds * req.devices * peak);
    plans.push_back(p);
  }

  /// The error when no candidate fits, with the smallest that came close
  /// and why a tensor-parallel degree was refused.
  llvm::Error noPlanFits(const std::vector<std::string> &refusals) const {
    std::string msg = "no plan fits " + std::to_string(req.devices) + " x " +
                      d.name + " (" + formatBytes(cap) + " usable per device) for a "
                      "global batch of " + std::to_string(req.globalBatch);
    if (!smallestPlan.empty())
      msg += "; the smallest needs " + formatBytes(smallestMemory) + " per device (" +
             smallestPlan + "): add devices" +
             (req.zeroStage && *req.zeroStage < 3 ? ", allow ZeRO-3" : "") +
             (req.recompute && !*req.recompute ? ", allow recomputation" : "") +
             ", or use a smaller micro-batch";
    for (const std::string &r : refusals)
      msg += "; " + r;
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  }
};

/// Ranks the plans that fit, sweeps the fastest for their live memory and
/// fills result.best and result.runnersUp.
llvm::Error rankPlans(std::vector<Plan> &plans,
                      const Profiles &profiles,
                      const PlanRequest &req, double cap, PlanResult &result) {
  const DeviceSpec &d = req.device;
  auto better = [&](const Plan &a, const Plan &b) {
    if (req.minimizeMemory && a.peakMemory != b.peakMemory)
      return a.peakMemory < b.peakMemory;
    if (a.stepSeconds != b.stepSeconds)
      return a.stepSeconds < b.stepSeconds;
    return a.peakMemory < b.peakMemory;
  };
  std::sort(plans.begin(), plans.end(), better);
  // The fastest plans again with each stage's memory from the liveness of
  // its step: a plan the sweep finds too big for the device is dropped.
  std::vector<Plan> kept;
  for (Plan &p : plans) {
    if (kept.size() > req.runnersUp)
      break;
    if (!sweepMemory(p, profiles.at({p.tp, p.sequenceParallel}), req) ||
        p.peakMemory <= cap)
      kept.push_back(std::move(p));
  }
  if (kept.empty())
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "no plan fits " + std::to_string(req.devices) + " x " + d.name + " (" +
            formatBytes(cap) + " usable per device) for a global batch of " +
            std::to_string(req.globalBatch) +
            ": the fastest plans' steps hold more live memory than that; add "
            "devices or allow recomputation");
  // The sweep measured each stage's memory anew: rank by it.
  if (req.minimizeMemory)
    std::stable_sort(kept.begin(), kept.end(), better);
  result.best = kept.front();
  for (size_t i = 1; i < kept.size(); ++i)
    result.runnersUp.push_back(kept[i]);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<PlanResult> choosePlan(mlir::ModuleOp module,
                                      const PlanRequest &req,
                                      const std::string &vocabOutput) {
  auto start = std::chrono::steady_clock::now();
  const DeviceSpec &d = req.device;
  PlanResult result;
  if (req.devices < 1 || req.globalBatch < 1)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "the plan needs devices >= 1 and a global "
                                   "batch >= 1");
  Profiles profiles;
  std::vector<std::string> refusals;
  auto base =
      profileModel(module, 1, vocabOutput, d.fusesElementwise,
                   /*sequenceParallel=*/false, req.precision, offloads(req));
  if (!base)
    return base.takeError();
  profilesPerTp(module, req, vocabOutput, *base, profiles, refusals);
  PlanSearch search{req, d, d.memoryBytes * req.memoryFraction,
                    base->modelFlopsPerSample, result};
  search.sweep(profiles);
  result.plansFitting = search.plans.size();
  result.plannerSeconds = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count();
  if (search.plans.empty())
    return search.noPlanFits(refusals);
  if (llvm::Error err = rankPlans(search.plans, profiles, req, search.cap, result))
    return std::move(err);
  return result;
}

} // namespace smp
