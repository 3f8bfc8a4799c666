//===- PlanReport.cpp - plan.txt ------------------------------------------===//
//
// The artifact's plan report: the device grid, each kind of parallelism in
// words, per-stage arena, weights and instruction counts.
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "llvm/ADT/StringSet.h"

#include "smp/Dialect/Smp/IR/DropoutKey.h"
#include "smp/Dialect/Smp/IR/SmpLayout.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/base/EvalMetrics.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace smp::writer {

static std::string humanBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (1ull << 30))
    snprintf(buf, sizeof(buf), "%.2f GiB", bytes / double(1ull << 30));
  else if (bytes >= (1ull << 20))
    snprintf(buf, sizeof(buf), "%.2f MiB", bytes / double(1ull << 20));
  else
    snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024.0);
  return buf;
}

/// `v` in %g form (no trailing zeros).
static std::string formatNumber(double v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

/// How an evaluation batch of another size than the global one combines
/// its global batches' losses (smp-mark-eval-padding's attributes).
static std::string evalBatchWeights(ModuleOp module) {
  if (module->hasAttr(SmpDialect::kEvalLossSumsAttr))
    return "each the sum of its global batches' losses";
  std::string s = "each its global batches' losses weighted by the labels "
                  "they count";
  auto ranges = module->getAttrOfType<DenseI64ArrayAttr>(
      SmpDialect::kEvalCountedLabelsAttr);
  if (!ranges)
    return s;
  ArrayRef<int64_t> r = ranges.asArrayRef();
  s += " (of each sample's labels, those the model's cross-entropy reads: ";
  for (size_t i = 0; i + 1 < r.size(); i += 2)
    s += (i ? ", " : "") + std::to_string(r[i]) +
         (r[i + 1] - r[i] > 1 ? ".." + std::to_string(r[i + 1] - 1) : "");
  return s + ")";
}

/// plan.txt's line on what smprun --eval-data runs of a training step.
static std::string evaluationLine(ModuleOp module, ArrayRef<func::FuncOp> funcs,
                                  llvm::StringRef why,
                                  const TrainingOptions &t) {
  if (!why.empty())
    return ("evaluation (smprun --eval-data): refused: " + why + "\n").str();
  llvm::StringSet<> norms; // by running mean (micro-batches copy the op)
  for (func::FuncOp f : funcs)
    f.walk([&](BatchNormOp bn) {
      if (auto m = bn->getAttrOfType<StringAttr>(SmpDialect::kRunningMeanAttr))
        norms.insert(m.getValue());
    });
  std::string text = "evaluation (smprun --eval-data): the instructions the "
                     "loss is computed from, dropout off";
  if (!norms.empty())
    text += ", " + std::to_string(norms.size()) +
            " batch norm(s) with their running statistics";
  auto hasOutput = [&](llvm::StringRef name) {
    return llvm::any_of(funcs, [&](func::FuncOp f) {
      for (unsigned i = 0; i < f.getNumResults(); ++i)
        if (auto o =
                f.getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr);
            o && o.getValue() == name)
          return true;
      return false;
    });
  };
  if (hasOutput(smp::base::kEvalHitsOutput))
    text += "; its accuracy too (of the labels the cross-entropy reads, "
            "those whose logit is the row's first maximum)";
  std::string tops, names, correlations;
  for (const std::string &m : t.evalMetrics)
    if (int64_t k = smp::base::topKAccuracy(m);
        k && hasOutput(smp::base::evalTopHitsOutput(k)))
      tops += (tops.empty() ? "" : ", ") + m;
    else if (smp::base::needsPredictions(m) &&
             hasOutput(smp::base::kEvalPredictionsOutput))
      correlations += (correlations.empty() ? "" : ", ") + m;
    else if (smp::base::needsConfusion(m) &&
             hasOutput(smp::base::kEvalConfusionOutput))
      names += (names.empty() ? "" : ", ") + m;
  if (!tops.empty())
    text += "; its " + tops +
            " too (smpc --eval-metrics: of those labels, those among their "
            "row's K first classes)";
  if (!names.empty())
    text += "; its " + names +
            " too (smpc --eval-metrics: from the confusion matrix of those "
            "labels by their row's first maximum)";
  if (!correlations.empty())
    text += "; its " + correlations +
            " too (smpc --eval-metrics: of the mse loss's output and target "
            "values, sample by sample)";
  if (hasOutput(smp::base::kEvalPredictionsOutput))
    text += "; each sample's predictions and labels (smpc "
            "--eval-predictions; smprun --eval-predictions DIR writes them)";
  int64_t every = t.evalEvery;
  if (t.evalOnStart)
    text += "; before the first step (smpc --eval-on-start)";
  if (every != 0)
    text += every > 0 ? "; every " + std::to_string(every) +
                            " steps (smpc --eval-every)"
                      : std::string("; every epoch of smprun's --data (smpc "
                                    "--eval-every epoch)");
  bool pads = module->hasAttr(SmpDialect::kEvalPadLabelsAttr);
  auto noCount =
      module->getAttrOfType<StringAttr>(SmpDialect::kEvalNoCountAttr);
  if (t.evalBatch > 0)
    text += pads && !noCount
                ? "; in batches of " + std::to_string(t.evalBatch) +
                      " (smpc --eval-batch-size), " + evalBatchWeights(module)
                : "; in global batches, not --eval-batch-size's " +
                      std::to_string(t.evalBatch) +
                      (pads ? " (smp cannot weigh the batches of the "
                              "model's own loss by the labels it counts: " +
                                  noCount.str() + ")"
                            : "");
  if (t.evalDelay > 0)
    text += "; none before " + std::string(every < 0 ? "epoch " : "step ") +
            formatNumber(t.evalDelay) + " (smpc --eval-delay)";
  if (auto l =
          module->getAttrOfType<StringAttr>(SmpDialect::kEvalPadLabelsAttr))
    text += "; a short last batch padded, its padding's '" + l.str() + "' -100";
  else if (auto n =
               module->getAttrOfType<StringAttr>(SmpDialect::kEvalNoPadAttr))
    text += "; a short last batch left out: " + n.str();
  return text + "\n";
}

/// What plan.txt says of a training step's data: its random dropouts
/// (their streams), those drawn inside a fused attention and what they draw
/// from; labels smprun shifts.
static std::string trainingLines(ModuleOp module,
                                 const TrainingOptions &training) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::SmallDenseSet<int64_t> streams, inAttention;
  module.walk([&](Operation *op) {
    if (!drawsDropout(op))
      return;
    streams.insert(dropoutStream(op));
    if (!isa<DropoutOp>(op))
      inAttention.insert(dropoutStream(op));
  });
  if (!streams.empty()) {
    os << "dropout: " << streams.size()
       << " random Dropout(s), masks drawn from seed " << training.seed
       << " by each element's place in the global batch (the same masks "
          "under any plan)";
    if (!inAttention.empty())
      os << "; " << inAttention.size()
         << " on attention probabilities, drawn inside the fused attention";
    os << "\n";
  }
  if (training.shiftLabels)
    os << "labels: each position's own token (Hugging Face's labels = "
          "input_ids); smprun feeds position t the label of t + 1, -100 at "
          "the last, as the transformers model shifts them (smpc "
          "--shift-labels)\n";
  return text;
}

std::string planReport(ModuleOp module, ArrayRef<func::FuncOp> funcs,
                       const std::vector<std::unique_ptr<Lowering>> &stages,
                       const ArtifactOptions &options, const DeviceGrid &grid,
                       llvm::StringRef evalRefusal) {
  std::string s;
  llvm::raw_string_ostream os(s);
  int64_t dp = grid.size[kDataAxis], pp = grid.size[kPipelineAxis],
          tp = grid.size[kTensorAxis];
  os << "smp plan report\n"
     << "target: " << options.target << "\n"
     << "ranks: " << grid.numRanks() << " (dp=" << dp << " tp=" << tp
     << " pp=" << pp << ", placement " << grid.placementLetters()
     << ": the right-most axis gets adjacent ranks)\n";
  if (grid.numRanks() == 1)
    os << "a single device runs the whole model\n";
  if (dp > 1) {
    int zero = options.training ? options.training->zeroStage : 0;
    os << "data parallel: " << dp << " replicas train on their share of the "
       << "batch; gradients are summed with "
       << (zero == 3 ? "reduce_scatter (ZeRO-3: as ZeRO-2, and each rank "
                       "stores its chunk of every parameter, all_gathered "
                       "before each use in the forward and the backward and "
                       "freed after; no all_gather after the update)"
           : zero == 2 ? "reduce_scatter (ZeRO-2: each micro-batch's gradients "
                       "in buckets as the backward makes them, each rank "
                       "keeping its chunk; sharded optimizer state, "
                       "all_gather of the parameters)"
           : zero == 1 ? "all_reduce (ZeRO-1: reduce_scatter, sharded "
                         "optimizer state, all_gather of the parameters)"
                       : "all_reduce")
       << "\n";
    if (zero > 0 && grid.shardRanks() < dp)
      os << "hybrid sharding: ZeRO-" << zero << " shards over groups of "
         << grid.shardRanks() << " adjacent data-parallel ranks and "
         << "replicates across the " << dp / grid.shardRanks()
         << " groups (the chunks' gradients all_reduced over dp_replica "
         << "once per step)\n";
  }
  if (tp > 1) {
    int64_t regions = 0;
    for (const auto &inst : stages.front()->program.instructions())
      if (inst.op() == "all_reduce" && inst.attrs().count("grid") &&
          inst.attrs().at("grid").s() == "tp")
        ++regions;
    os << "tensor parallel: " << tp << " ranks split the MLP and attention "
       << "layers (column- then row-parallel); " << regions
       << " all_reduce(s) over tp per step in the forward and backward\n";
    int64_t scatters = 0, gathers = 0;
    for (const auto &inst : stages.front()->program.instructions())
      if (inst.attrs().count("grid") && inst.attrs().at("grid").s() == "tp") {
        scatters += inst.op() == "reduce_scatter";
        gathers += inst.op() == "all_gather";
      }
    if (scatters > 0)
      os << "sequence parallel: between those layers (norms, residual and "
         << "bias adds) each tp rank keeps 1/" << tp << " of the tokens; "
         << scatters << " reduce_scatter(s) and " << gathers
         << " all_gather(s) over tp per step\n";
    if (auto main = module.lookupSymbol<func::FuncOp>("main"))
      for (unsigned i = 0; i < main.getNumResults(); ++i)
        if (LayoutAttr layout = getResultLayout(main, i);
            layout && layout.hasTpSplit()) {
          int64_t v =
              layout.fullExtent(cast<RankedTensorType>(main.getResultTypes()[i])
                                    .getDimSize(layout.getTpDim()),
                                tp);
          os << "vocab parallel: the LM head and the cross-entropy over " << v
             << " classes are split by vocabulary, " << (v + tp - 1) / tp
             << " rows per rank" << (v % tp ? " (the last zero-padded)" : "")
             << "\n";
        }
  }
  if (pp > 1 || module->hasAttr(SmpDialect::kScheduleAttr)) {
    os << "pipeline: " << pp << " ranks";
    if (auto sched = module->getAttrOfType<StringAttr>(SmpDialect::kScheduleAttr))
      os << ", schedule " << sched.getValue();
    os << "\n";
    if (auto costs =
            module->getAttrOfType<DenseF64ArrayAttr>(SmpDialect::kStageCostsAttr)) {
      double total = 0;
      for (double c : costs.asArrayRef())
        total += c;
      os << "stage costs (predicted FLOPs + bytes of the forward, share):";
      for (auto [k, c] : llvm::enumerate(costs.asArrayRef())) {
        char buf[64];
        snprintf(buf, sizeof(buf), " %zu: %.3g (%.0f%%)", k, c,
                 total > 0 ? 100.0 * c / total : 0.0);
        os << buf;
      }
      os << "\n";
    }
  }
  if (options.training)
    os << trainingLines(module, *options.training);
  if (options.training)
    os << evaluationLine(module, funcs, evalRefusal, *options.training);
  for (auto [p, lowering] : llvm::enumerate(stages)) {
    const pb::RankProgram &program = lowering->program;
    uint64_t weights = 0, sends = 0, recvs = 0, forward = 0, evalOnly = 0;
    for (const auto &w : program.weights())
      weights += w.bytes();
    for (const auto &inst : program.instructions()) {
      forward += inst.forward();
      evalOnly += inst.eval_only();
      sends += inst.op() == "send" && !inst.eval_only();
      recvs += inst.op() == "recv" && !inst.eval_only();
    }
    std::string who = pp > 1 ? "pipeline rank " + std::to_string(p) : "rank 0";
    os << who << ": arena " << humanBytes(program.arena_bytes()) << " ("
       << program.arena_bytes() << " bytes), of which parameters, states and "
       << "constants " << humanBytes(weights) << "\n"
       << who << ": " << program.instructions_size() << " instructions over "
       << program.buffers_size() << " buffers";
    if (pp > 1)
      os << ", " << sends << " sends and " << recvs << " receives per step";
    if (options.training)
      os << "; " << forward << " in an evaluation";
    if (evalOnly > 0) // batch norms' running statistics, --eval-accuracy
      os << " (" << evalOnly << " of them only there)";
    os << "\n";
  }
  std::map<std::string, int> ops;
  for (const auto &inst : stages.front()->program.instructions())
    ++ops[inst.op()];
  os << (pp > 1 ? "pipeline rank 0" : "rank 0") << " instructions by op:\n";
  for (const auto &[op, n] : ops)
    os << "  " << op << ": " << n << "\n";
  return s;
}

} // namespace smp::writer
