//===- Planner.cpp - Choose dp x tp x pp, micro-batches, schedule ---------===//
//
// The search: tp over the divisors of the devices within a node (those the
// model's heads allow), pp over the divisors of what is left (up to the cut
// points), dp the rest; the micro-batch size over the divisors of each
// replica's batch; recomputation on or off; ZeRO stage 0, 1 or 2; the
// schedules. For each (tp, pp, micro-batch, recompute, ZeRO) the stages are
// cut by binary search on the slowest stage's time with a greedy
// feasibility check (each stage takes the longest run of ops whose time and
// memory fit), which is exact for contiguous stages because both limits
// only grow with a stage (StagePartition.cpp). A pin no candidate can take
// (a pp that does not divide the devices, an interleaved schedule of one
// stage) is named in the error rather than reported as memory.
//
// Time of a step, from the cost model:
//   pipeline     the schedule (lib/Schedule) simulated with each stage's
//                forward and backward of one micro-batch (B = 2F, + F when
//                recomputing; PipelineCosts.cpp) and the activations and
//                gradients sent between stages: m (F + B) of the slowest
//                stage / (1 - bubble) when the stages are equal
//   data parallel  the gradients' all-reduce or reduce-scatter, ZeRO's
//                parameter all-gathers (DataParallelTime.cpp): all of it
//                on a backend whose collectives block (the CPU's), else
//                (DeviceSpec::overlapsCommunication, the CUDA backend) what
//                outlasts the compute each stage runs beside it, the
//                buckets after the backward ops that complete them and
//                ZeRO-3's gathers prefetched; hierarchical when a replica
//                group has several devices per node (the cluster placement
//                puts tp x pp innermost)
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

#include "DataParallelTime.h"
#include "PipelineCosts.h"
#include "PlannerInternal.h"
#include "StagePartition.h"

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

using planning::Candidate;
using planning::Evaluator;
using planning::Partition;
using planning::Stages;

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

/// The profiles by (tensor-parallel degree, sequence parallelism).
using ProfileKey = std::pair<int64_t, bool>;
using Profiles = std::map<ProfileKey, ModelProfile>;

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
                            req.precision, offloads(req), req.masterWeights,
                            req.loss);
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
/// 1F1B; a pipeline any schedule, interleaved where its chunks fit. (From
/// 2026-12-06 to 12-07 NCCL devices searched no interleaved schedule: its
/// messages' groups waited for each other on the one communication stream;
/// the runtime's pipes, a stream per pair of ranks and direction, ended
/// that: bench/pipeline_nccl_model.py.)
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
    std::vector<int64_t> tps, tpTimesPp; // what a pinned pp or dp missed
    bool ppFits = false, dpFits = false;
    for (auto &[key, profile] : profiles) {
      int64_t tp = key.first;
      tps.push_back(tp);
      for (int64_t pp : divisors(req.devices / tp)) {
        if (req.pp && pp != *req.pp)
          continue;
        ppFits = true;
        int64_t dp = req.devices / (tp * pp);
        if (req.dp && dp != *req.dp) {
          tpTimesPp.push_back(tp * pp);
          continue;
        }
        dpFits = true;
        if (req.globalBatch % dp != 0) {
          exclude("the global batch " + std::to_string(req.globalBatch) +
                      " is not a multiple of dp {}",
                  dp);
          continue;
        }
        int64_t perReplica = req.globalBatch / dp;
        if (req.microbatchSize && perReplica % *req.microbatchSize != 0)
          exclude("the micro-batch size " +
                      std::to_string(*req.microbatchSize) +
                      " does not divide the samples per data-parallel rank "
                      "(the global batch " +
                      std::to_string(req.globalBatch) + " over dp {})",
                  dp);
        if (req.microbatches && perReplica % *req.microbatches != 0)
          exclude(std::to_string(*req.microbatches) +
                      " micro-batches do not divide the samples per "
                      "data-parallel rank (the global batch " +
                      std::to_string(req.globalBatch) + " over dp {})",
                  dp);
        for (int64_t b : divisors(perReplica)) {
          int64_t m = perReplica / b;
          if (req.microbatchSize
                  ? b != *req.microbatchSize
                  : (req.microbatches ? m != *req.microbatches : b > 64))
            continue;
          if (pp > 1 && m < pp && !req.microbatchSize && !req.microbatches)
            continue; // a pipeline needs micro-batches to fill it
          Stages st(profile, d, b);
          if (static_cast<int64_t>(st.cuts.size()) < pp - 1) {
            exclude("pp " + std::to_string(pp) + " needs " +
                        std::to_string(pp - 1) +
                        " cut points and the model has {}",
                    static_cast<int64_t>(st.cuts.size()));
            continue;
          }
          sweepOptions(st, tp, pp, dp, b, m);
        }
      }
    }
    for (int64_t tp : ppFits ? std::vector<int64_t>{} : tps)
      exclude("pp " + std::to_string(req.pp.value_or(0)) +
                  " does not divide the " + std::to_string(req.devices) +
                  " devices over tensor-parallel degree {}",
              tp);
    for (int64_t n : dpFits ? std::vector<int64_t>{} : tpTimesPp)
      exclude("dp " + std::to_string(req.dp.value_or(0)) +
                  " x tp x pp must be the " + std::to_string(req.devices) +
                  " devices (tp x pp was {})",
              n);
  }

  /// Recomputation, the ZeRO stage, offloading and the schedule for one shape.
  void sweepOptions(const Stages &st, int64_t tp, int64_t pp, int64_t dp,
                    int64_t b, int64_t m) {
    if (req.zeroStage && *req.zeroStage > 0 && dp == 1)
      exclude("ZeRO-" + std::to_string(*req.zeroStage) +
              " shards over the data-parallel ranks and dp is 1");
    auto schedules = candidateSchedules(st, req, pp, m);
    if (req.schedule && llvm::none_of(schedules, [&](const auto &s) {
          return s.first == *req.schedule &&
                 (!req.virtualStages || s.second == *req.virtualStages);
        }))
      scheduleRefusal(st, pp, m);
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
          for (auto &[schedule, v] : schedules) {
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

  /// Notes why the pinned schedule (and virtual stages) cannot run `pp`
  /// stages of `m` micro-batches.
  void scheduleRefusal(const Stages &st, int64_t pp, int64_t m) {
    std::string name = "schedule " + *req.schedule;
    bool interleaved = *req.schedule == "interleaved";
    if (!interleaved && req.virtualStages && *req.virtualStages > 1)
      return exclude(name + " does not take virtual stages (interleaved does)");
    if (pp == 1)
      return exclude(name + " needs a pipeline (pp > 1); one stage runs 1f1b");
    if (interleaved && req.virtualStages && *req.virtualStages < 2)
      return exclude(name + " needs 2 or more virtual stages");
    if (!interleaved)
      return exclude(name + " cannot run pp {}", pp);
    if (m % pp != 0)
      return exclude(name + " needs the micro-batches to be a multiple of pp " +
                         std::to_string(pp) + " (they are {})",
                     m);
    int64_t v = req.virtualStages.value_or(2);
    exclude(name + " with " + std::to_string(v) + " virtual stages at pp " +
                std::to_string(pp) + " needs " + std::to_string(pp * v - 1) +
                " cut points and the model has {}",
            static_cast<int64_t>(st.cuts.size()));
  }

  /// Remembers why a pinned choice ruled candidates out (the error when
  /// none was left to price): `why` with "{}" standing for the values it
  /// was met with.
  void exclude(const std::string &why, std::optional<int64_t> value = {}) {
    auto it =
        llvm::find_if(excluded, [&](const auto &e) { return e.first == why; });
    if (it == excluded.end())
      it = excluded.insert(excluded.end(), {why, {}});
    if (value && !llvm::is_contained(it->second, *value))
      it->second.push_back(*value);
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> excluded;

  /// The reasons exclude() noted, "; "-separated.
  std::string exclusions() const {
    std::string out;
    for (auto [why, values] : excluded) {
      llvm::sort(values);
      std::string list;
      for (size_t i = 0; i < values.size(); ++i)
        list += (i == 0                   ? ""
                 : i + 1 == values.size() ? " or "
                                          : ", ") +
                std::to_string(values[i]);
      size_t at = why.find("{}");
      if (at != std::string::npos)
        why.replace(at, 2, list);
      out += (out.empty() ? "" : "; ") + why;
    }
    return out;
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
    if (!plans.empty())
      return; // only the error when nothing fits names it
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
    // Activations forward and gradients back across every cut: each
    // message on the critical path where the next stage waits for it.
    double p2p = 0;
    for (size_t s = 0; s + 1 < part.ends.size(); ++s)
      p2p = std::max(p2p, collectiveTime(
                              Collective::P2P,
                              profile.ops[part.ends[s]].boundaryBytes * b, 2,
                              crossNode(tp * pp, d), d));
    p.bubble = 0;
    p.pipelineSeconds = m * part.time[0];
    if (pp > 1) {
      // The schedule simulated with each stage's own time.
      p.pipelineSeconds =
          planning::pipelineSeconds(*schedule::parseScheduleKind(schedule), m,
                                    part.time, p.recompute, v, p2p, &p.bubble);
      if (p.pipelineSeconds < 0)
        return;
    }
    double stageParams = 0;
    for (size_t s = 0, begin = 0; s < part.ends.size(); ++s) {
      stageParams = std::max(stageParams, st.prefixParams[part.ends[s] + 1] -
                                              st.prefixParams[begin]);
      begin = part.ends[s] + 1;
    }
    // The data-parallel ranks of a node (adjacent dp coordinates: the
    // placement puts tp and pp inside a node first).
    int64_t dpPerNode = std::max<int64_t>(1, d.devicesPerNode / (tp * pp));
    planning::DataParallelTime dpTime = planning::dataParallelTime(
        st, req, c, part.ends, part.recompute, dpPerNode);
    p.dataParallelSeconds = dpTime.exposed;
    p.dataParallelCommSeconds = dpTime.total;
    double touched = stageParams *
                     (3 + 2 * optimizerStateFactor(req.optimizer)) /
                     (c.zero > 0 ? c.shard : 1);
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
    if (result.plansPriced == 0 && !excluded.empty()) {
      std::string msg = "no plan matches what was pinned: " + exclusions();
      for (const std::string &r : refusals)
        msg += "; " + r;
      return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
    }
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
  auto base = profileModel(module, 1, vocabOutput, d.fusesElementwise,
                           /*sequenceParallel=*/false, req.precision,
                           offloads(req), req.masterWeights, req.loss);
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
