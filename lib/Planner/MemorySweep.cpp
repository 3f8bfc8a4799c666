//===- MemorySweep.cpp - The planner's liveness memory model -----------===//
//
// Each stage's memory from the liveness of its profiled step: parameters,
// optimizer state, the step's peak for one micro-batch (gradients counted
// as the ZeRO stage and gradient accumulation keep them), and the saved
// activations of the other micro-batches the schedule holds.
//
//===----------------------------------------------------------------------===//

#include "PlannerInternal.h"

#include "smp/Planner/Planner.h"
#include "smp/Schedule/PipelineSchedule.h"
#include "llvm/ADT/DenseSet.h"

namespace smp {

namespace {

/// A backward a rank runs (B or BI): the micro-batches whose activations it
/// holds then (F done and B/BI not, plus ZB-H1's pending weight gradients
/// that still read theirs; never more than p, a chunk's share each when
/// interleaved), whether every gradient exists by then (a backward or a
/// weight gradient has run before: gradient accumulation keeps them whole
/// from there on; the first backward makes them as it goes), and of the
/// other micro-batches held, those whose weight gradients are pending
/// (ZB-H1): with recomputation they hold the recomputed activations those
/// read, not the checkpoints.
struct Backward {
  double held;
  bool gradientsWhole;
  double pendingWeights = 0;
};

/// Each rank's backwards in its order, from the simulated schedule; without
/// one, the first backward and a later one, each holding one micro-batch.
std::vector<std::vector<Backward>> rankBackwards(const Plan &p) {
  int pp = static_cast<int>(p.pp), m = static_cast<int>(p.microbatches),
      v = static_cast<int>(p.virtualStages);
  // With data parallelism the accumulated gradients are whole from the
  // first backward (the compiled step keeps them flattened in buckets).
  bool grownWhole = p.dp > 1 && p.microbatches > 1;
  std::vector<std::vector<Backward>> backwards(
      p.pp, {{1.0, grownWhole}, {1.0, p.microbatches > 1}});
  auto kind = schedule::parseScheduleKind(p.schedule);
  if (p.pp <= 1 || !kind ||
      static_cast<long long>(pp) * m * v * 3 >= schedule::kMaxActions)
    return backwards;
  schedule::Schedule sched = schedule::buildSchedule(*kind, pp, m, v);
  schedule::SimulationResult sim = schedule::simulateSchedule(sched, pp, m, v);
  if (!sim.complete || sim.deadlock)
    return backwards;
  for (int r = 0; r < pp; ++r) {
    backwards[r].clear();
    int inFlight = 0, pendingW = 0;
    bool whole = grownWhole;
    for (const schedule::Action &a : sched[r]) {
      if (a.kind == schedule::Action::F) {
        ++inFlight;
        continue;
      }
      if (a.kind == schedule::Action::BW) {
        --pendingW;
        whole = true;
        continue;
      }
      double held = std::max(1.0, std::min(pp * v, inFlight + pendingW) /
                                      static_cast<double>(v));
      backwards[r].push_back(
          {held, whole, std::min(held - 1, pendingW / static_cast<double>(v))});
      --inFlight;
      if (a.kind == schedule::Action::BI)
        ++pendingW;
      else
        whole = true;
    }
  }
  return backwards;
}

} // namespace

/// Replaces `p`'s stage memory by the liveness of each stage's step: the
/// parameters and optimizer state of the stage, the most bytes its step
/// holds at once for one micro-batch (with gradient accumulation over
/// several micro-batches, the gradients whole), and the saved activations of
/// the other micro-batches in flight; a recomputing stage from the step
/// built with recomputation, an offloading plan's from the step built with
/// offloading (what it keeps per micro-batch: what is not offloaded).
/// Returns whether it swept.
bool sweepMemory(Plan &p, const ModelProfile &profile, const PlanRequest &req) {
  if (profile.step(false, p.offload).values.empty() ||
      (p.recompute && profile.step(true, p.offload).values.empty()) ||
      p.stageEnds.size() != static_cast<size_t>(p.pp) ||
      p.stageRecompute.size() != static_cast<size_t>(p.pp))
    return false;
  double b = static_cast<double>(p.microbatchSize);
  double stateFactor = optimizerStateFactor(req.optimizer) /
                       (p.zeroStage > 0 ? static_cast<double>(p.shardRanks()) : 1.0);
  std::vector<std::vector<Backward>> backwards = rankBackwards(p);
  for (size_t s = 0, begin = 0; s < p.stageEnds.size(); ++s) {
    size_t end = p.stageEnds[s] + 1;
    const ModelProfile::StepMemory &memory =
        profile.step(p.stageRecompute[s], p.offload);
    const std::vector<ModelProfile::StepValue> &values = memory.values;
    double params = 0;
    llvm::DenseSet<unsigned> mine; // a tied weight: a copy on every stage
    for (size_t i = begin; i < end; ++i)
      for (unsigned id : profile.ops[i].params)
        if (mine.insert(id).second)
          params += profile.paramSizes[id];
    // What the stage keeps per micro-batch, with what it receives (which
    // offloading copies to host with the rest).
    double received =
        begin > 0 && !p.offload ? profile.ops[begin - 1].boundaryBytes * b : 0;
    double saved = stageSavedBytes(values, begin, end, b) + received;
    double savedForWeights =
        p.stageRecompute[s]
            ? stageSavedBytes(profile.step(false, p.offload).values, begin, end,
                              b) +
                  received
            : saved;
    // The step's live peak with the gradients made as the backward goes,
    // and without them (counted whole once they all exist).
    // ZeRO-2 (and ZeRO-1 of one micro-batch) never keeps them whole: each
    // is kept until its bucket is scattered, and the bucket's chunk (1/dp
    // of it) from then on.
    bool zero2 = scattersGradients(p.zeroStage, p.microbatches),
         zero3 = p.zeroStage == 3;
    ShardedParameters sharded{&memory.copies,
                              1.0 / static_cast<double>(p.shardRanks()),
                              req.gatherPrefetch};
    // ZeRO-2's chunks: made bucket by bucket in the first backward, all
    // there in a later one (the sum of the micro-batches so far).
    bool sharedCasts = p.microbatches > 1;
    StepPeak growing =
        stepPeak(values, begin, end, b,
                 {zero2 ? GradientLifetime::Scattered : GradientLifetime::Kept,
                  req.bucketBytes, zero3 ? &sharded : nullptr,
                  zero2 ? sharded.fraction : 0, sharedCasts});
    StepPeak accumulating =
        zero2 ? stepPeak(values, begin, end, b,
                         {GradientLifetime::Scattered, req.bucketBytes,
                          zero3 ? &sharded : nullptr, 0, sharedCasts})
              : growing;
    // The sums' buckets (data parallelism's all-reduce, ZeRO-1's scatter)
    // are packed in the last backward.
    StepPeak withoutGradients = stepPeak(
        values, begin, end, b,
        {GradientLifetime::Accumulated,
         p.dp > 1 && !zero2 ? req.bucketBytes : 0, nullptr, 0, sharedCasts});
    double chunks = zero2 ? params / static_cast<double>(p.shardRanks()) : 0;
    double peak = 0;
    MemoryBreakdown parts;
    for (const Backward &k : backwards[s]) {
      bool whole = k.gradientsWhole && !zero2;
      bool later = zero2 && k.gradientsWhole;
      const StepPeak &step =
          whole ? withoutGradients : later ? accumulating : growing;
      double stepChunks = later ? chunks : 0;
      double others = (k.held - 1 - k.pendingWeights) * saved +
                      k.pendingWeights * savedForWeights;
      double at = (whole ? params : stepChunks) + step.total + others;
      if (at < peak)
        continue;
      peak = at;
      parts.gradients = whole ? params : step.gradients + stepChunks;
      parts.activations = step.saved + others;
      parts.workspace = step.other;
    }
    // ZeRO-3 keeps 1/dp of the parameters; the copies it gathers are in
    // the step's peak (counted as parameters below).
    double stored = zero3 ? params / static_cast<double>(p.shardRanks()) : params;
    parts.parameters = stored + (zero3 ? growing.gathered : 0);
    parts.optimizerState = params * stateFactor;
    p.stageMemory[s] = stored + params * stateFactor + peak;
    p.stageBreakdown.resize(p.stageMemory.size());
    p.stageBreakdown[s] = parts;
    begin = end;
  }
  p.peakMemory = *std::max_element(p.stageMemory.begin(), p.stageMemory.end());
  p.memoryModel = "liveness";
  return true;
}

} // namespace smp
