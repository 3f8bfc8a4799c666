//===- PlanFormat.cpp - The planner's result as text and JSON -------------===//
//
// What `smpc plan` prints (formatPlanResult), what --json and plan.json hold
// (planResultJson), and a plan's one-line summary.
//
//===----------------------------------------------------------------------===//

#include "smp/Planner/Planner.h"

#include "PlannerInternal.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

namespace smp {

std::string formatBytes(double bytes) {
  char buf[32];
  if (bytes >= 1e9)
    snprintf(buf, sizeof(buf), "%.1f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  else
    snprintf(buf, sizeof(buf), "%.1f KB", bytes / 1e3);
  return buf;
}

std::string Plan::summary() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "dp=" << dp << " tp=" << tp << " pp=" << pp << " micro-batch "
     << microbatchSize << " x " << microbatches << " " << schedule;
  if (virtualStages > 1)
    os << " v=" << virtualStages;
  if (sequenceParallel)
    os << " sp";
  if (zeroStage > 0)
    os << " zero-" << zeroStage;
  if (zeroStage > 0 && shardRanks() < dp)
    os << " sharded " << shardRanks() << "x" << dp / shardRanks();
  if (offload)
    os << " offload";
  if (recompute) {
    bool all = llvm::all_of(stageRecompute, [](bool r) { return r; });
    os << " recompute";
    if (!all) {
      os << " (stages";
      for (size_t k = 0; k < stageRecompute.size(); ++k)
        if (stageRecompute[k])
          os << " " << k;
      os << ")";
    }
  }
  return s;
}

/// What the data-parallel time of a ZeRO stage is spent on.
static const char *dataParallelLabel(int64_t zeroStage) {
  switch (zeroStage) {
  case 0:
    return "all-reduce";
  case 3:
    return "reduce-scatter + parameter all-gathers";
  default:
    return "reduce-scatter + all-gather";
  }
}

/// ", exposed of 0.05 s" where collectives ran beside compute.
static std::string overlapped(const Plan &p) {
  if (p.dataParallelCommSeconds <= p.dataParallelSeconds * (1 + 1e-9))
    return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, " exposed of %.4g s",
                p.dataParallelCommSeconds);
  return buf;
}

std::string formatPlanResult(const PlanResult &r, const PlanRequest &req) {
  std::string s;
  llvm::raw_string_ostream os(s);
  const Plan &p = r.best;
  os << "plan for " << req.devices << " x " << req.device.name
     << ", global batch " << req.globalBatch << ": " << p.summary() << "\n"
     << llvm::format(
            "  predicted step %.4g s (pipeline %.4g s, bubble %.1f%%, "
            "data-parallel %s %.4g s%s, optimizer %.4g s)\n",
            p.stepSeconds, p.pipelineSeconds, 100 * p.bubble,
            (std::string(dataParallelLabel(p.zeroStage)) +
             (p.zeroStage > 0 && p.shardRanks() < p.dp
                  ? " within groups of " + std::to_string(p.shardRanks()) +
                        ", all-reduce across them"
                  : ""))
                .c_str(),
            p.dataParallelSeconds, overlapped(p).c_str(), p.optimizerSeconds)
     << llvm::format("  throughput %.4g samples/s, MFU %.1f%%\n",
                     p.samplesPerSecond, 100 * p.mfu)
     << "  memory per device: " << formatBytes(p.peakMemory) << " of "
     << formatBytes(req.device.memoryBytes);
  if (p.pp > 1) {
    os << " (stages:";
    for (double m : p.stageMemory)
      os << " " << formatBytes(m);
    os << ")";
  }
  os << "\n";
  if (!p.cuts.empty()) {
    os << "  stages start at:";
    for (const std::string &c : p.cuts)
      os << " " << c;
    os << "\n";
  }
  os << "  why: the fastest of " << r.plansFitting << " plans that fit ("
     << r.plansPriced << " priced in " << llvm::format("%.2f", r.plannerSeconds)
     << " s)";
  os << "\n";
  if (!r.runnersUp.empty()) {
    os << "runners-up:\n"
       << llvm::format("  %-56s %10s %8s %10s\n", "plan", "step (s)", "MFU",
                       "memory");
    for (const Plan &q : r.runnersUp)
      os << llvm::format("  %-56s %10.4g %7.1f%% %10s\n", q.summary().c_str(),
                         q.stepSeconds, 100 * q.mfu, formatBytes(q.peakMemory).c_str());
  }
  return s;
}

std::string planResultJson(const PlanResult &r, const PlanRequest &req) {
  auto planJson = [](const Plan &p) {
    llvm::json::Array stages;
    for (size_t s = 0; s < p.stageSeconds.size(); ++s) {
      llvm::json::Object stage{{"seconds", p.stageSeconds[s]},
                               {"memory_bytes", p.stageMemory[s]}};
      if (s < p.stageBreakdown.size()) {
        const MemoryBreakdown &m = p.stageBreakdown[s];
        stage["memory"] = llvm::json::Object{
            {"parameters", m.parameters}, {"gradients", m.gradients},
            {"optimizer_state", m.optimizerState},
            {"activations", m.activations}, {"workspace", m.workspace}};
      }
      stages.push_back(std::move(stage));
    }
    llvm::json::Array cuts;
    for (const std::string &c : p.cuts)
      cuts.push_back(c);
    return llvm::json::Object{
        {"dp", p.dp},
        {"tp", p.tp},
        {"pp", p.pp},
        {"microbatch_size", p.microbatchSize},
        {"microbatches", p.microbatches},
        {"schedule", p.schedule},
        {"virtual_stages", p.virtualStages},
        {"zero_stage", p.zeroStage},
        {"sharded_dp", p.shardRanks()},
        {"sequence_parallel", p.sequenceParallel},
        {"recompute", p.recompute},
        {"offload", p.offload},
        {"recompute_stages",
         [&] {
           llvm::json::Array a;
           for (size_t k = 0; k < p.stageRecompute.size(); ++k)
             if (p.stageRecompute[k])
               a.push_back(static_cast<int64_t>(k));
           return a;
         }()},
        {"step_seconds", p.stepSeconds},
        {"pipeline_seconds", p.pipelineSeconds},
        {"bubble", p.bubble},
        {"data_parallel_seconds", p.dataParallelSeconds},
        {"data_parallel_comm_seconds", p.dataParallelCommSeconds},
        {"optimizer_seconds", p.optimizerSeconds},
        {"samples_per_second", p.samplesPerSecond},
        {"mfu", p.mfu},
        {"peak_memory_bytes", p.peakMemory},
        {"memory_model", p.memoryModel},
        {"stages", std::move(stages)},
        {"cuts", std::move(cuts)}};
  };
  llvm::json::Array runners;
  for (const Plan &p : r.runnersUp)
    runners.push_back(planJson(p));
  llvm::json::Object root{
      {"devices", req.devices},      {"device", req.device.name},
      {"global_batch", req.globalBatch},
      {"optimize", req.minimizeMemory ? "memory" : "speed"},
      {"best", planJson(r.best)},     {"runners_up", std::move(runners)},
      {"plans_priced", static_cast<int64_t>(r.plansPriced)},
      {"plans_fitting", static_cast<int64_t>(r.plansFitting)},
      {"planner_seconds", r.plannerSeconds}};
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return s;
}

} // namespace smp
