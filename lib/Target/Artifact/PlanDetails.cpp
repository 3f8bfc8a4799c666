//===- PlanDetails.cpp - plan.txt's training sections and plan.json -------===//
//
// What every compile (pinned or planned) reports beside the parallelism in
// words (PlanReport.cpp): the command that reproduces the plan, the inputs,
// the loss, optimizer and precision, the degrees and schedule, where each
// pipeline stage starts (by ONNX node name), each stage's recompute and
// offload decisions and memory, the rank map (rank -> dp/pp/tp; the host is
// only known at launch) and the predicted step time. plan.json holds the
// same as JSON under "artifact" (beside the planner's report when the
// planner chose the plan).
//
//===----------------------------------------------------------------------===//

#include "Lowering.h"

#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/base/DType.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

namespace smp::writer {
namespace {

/// The ONNX node name an op keeps in its location ("" when none).
std::string nodeName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(l))
        return name.getName().str();
  return "";
}

/// The first ONNX node a stage's function computes (not a receive from the
/// previous stage).
std::string firstNode(func::FuncOp f) {
  std::string found;
  f.walk([&](Operation *op) {
    if (isa<RecvOp, SendOp>(op))
      return WalkResult::advance();
    found = nodeName(op->getLoc());
    return found.empty() ? WalkResult::advance() : WalkResult::interrupt();
  });
  return found;
}

std::string typeName(uint32_t dtype) {
  return dtype <= static_cast<uint32_t>(smp::base::DType::U64)
             ? smp::base::dtypeName(static_cast<smp::base::DType>(dtype))
             : "dtype" + std::to_string(dtype);
}

std::string shapeText(const google::protobuf::RepeatedField<int64_t> &shape) {
  std::string s = "[";
  for (int i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

llvm::json::Array shapeJson(const google::protobuf::RepeatedField<int64_t> &shape) {
  llvm::json::Array a;
  for (int64_t d : shape)
    a.push_back(d);
  return a;
}

bool recomputes(const TrainingOptions &t, int64_t stage) {
  return t.recompute != "none" &&
         (t.recomputeStages.empty() ||
          llvm::is_contained(t.recomputeStages, stage));
}

/// "  at its peak: ..." for a stage whose arena holds anything.
void printArenaPeak(llvm::raw_ostream &os, const PlanDetails::Stage &st) {
  const ArenaPeak &p = st.peak;
  if (!p.liveBytes)
    return;
  os << "  at its peak " << p.liveBytes << " bytes are live";
  if (p.instruction >= 0 && !p.op.empty())
    os << " (instruction " << p.instruction << ", " << p.op
       << (p.loc.empty() ? "" : " '" + p.loc + "'") << ")";
  os << ": parameters " << p.parameters << ", optimizer state "
     << p.optimizerState << ", inputs " << p.inputs << ", constants "
     << p.constants << ", the step's values " << p.stepValues;
  for (size_t k = 0; k < p.largest.size(); ++k) {
    const ArenaPeak::Value &v = p.largest[k];
    os << (k ? ", " : " (largest: ") << "'" << v.name << "' " << v.bytes << " ["
       << v.made << ", " << v.lastRead << "]"
       << (k + 1 == p.largest.size() ? ")" : "");
  }
  if (st.arenaBytes > p.liveBytes)
    os << "; the layout adds " << st.arenaBytes - p.liveBytes;
  os << "\n";
}

} // namespace

PlanDetails collectPlanDetails(const SmallVector<func::FuncOp> &funcs,
                               const std::vector<std::unique_ptr<Lowering>> &stages,
                               const ArtifactOptions &options,
                               const DeviceGrid &grid,
                               const pb::Manifest &manifest) {
  PlanDetails d;
  d.manifest = &manifest;
  d.options = &options;
  d.grid = grid;
  for (size_t p = 0; p < stages.size(); ++p) {
    PlanDetails::Stage s;
    s.startsAt = p == 0 ? "" : p < funcs.size() ? firstNode(funcs[p]) : "";
    s.arenaBytes = stages[p]->program.arena_bytes();
    s.hostBytes = stages[p]->program.host_arena_bytes();
    s.peak = stages[p]->peak;
    for (const auto &w : stages[p]->program.weights())
      s.weightsBytes += w.bytes();
    if (options.training) {
      s.recompute = recomputes(*options.training, static_cast<int64_t>(p))
                        ? options.training->recompute
                        : "none";
      s.offload = options.training->offload;
    }
    d.stages.push_back(std::move(s));
  }
  return d;
}

std::string planDetailsText(const PlanDetails &d) {
  std::string s;
  llvm::raw_string_ostream os(s);
  const ArtifactOptions &o = *d.options;
  const pb::Manifest &m = *d.manifest;
  if (!o.command.empty())
    os << "reproduce with: " << o.command << "\n";
  os << "inputs (each data-parallel rank's batch):";
  bool first = true;
  for (const auto &in : m.inputs()) {
    if (!in.name().empty() && in.name()[0] == '@')
      continue; // @lr, @step: fed by smprun
    os << (first ? " " : ", ") << in.name() << " " << typeName(in.dtype())
       << shapeText(in.shape());
    first = false;
  }
  os << "\n";
  if (!o.training) {
    // smprun --output-dir runs K batches' worth of data batch by batch
    // only when every output is per sample (smp-mark-sample-outputs).
    os << "outputs:";
    first = true;
    for (const auto &out : m.outputs()) {
      os << (first ? " " : ", ") << out.name() << " " << typeName(out.dtype())
         << shapeText(out.shape());
      if (out.samples() == "per-sample")
        os << " (per sample)";
      else if (!out.samples().empty())
        os << " (not per sample: " << out.samples() << ")";
      first = false;
    }
    os << "\n";
  }
  if (o.training) {
    const TrainingOptions &t = *o.training;
    os << "loss: " << t.loss << "\n"
       << "optimizer: " << m.training().optimizer_spec() << ", lr "
       << llvm::format("%g", t.lr) << " (" << t.lrSchedule;
    if (t.warmupSteps)
      os << ", " << t.warmupSteps << " warm-up steps";
    os << ")\n"
       << "precision: " << t.precision << "\n";
    if (!t.storedParameters.empty())
      os << "parameters: " << t.storedParameters << "\n";
    os << "degrees: dp=" << d.grid.size[kDataAxis]
       << " tp=" << d.grid.size[kTensorAxis]
       << " pp=" << d.grid.size[kPipelineAxis] << ", " << t.microbatches
       << " micro-batch" << (t.microbatches == 1 ? "" : "es") << " per step"
       << (m.schedule().empty() ? "" : ", schedule " + m.schedule()) << "\n";
  }
  for (size_t p = 0; p < d.stages.size(); ++p) {
    const PlanDetails::Stage &st = d.stages[p];
    os << "stage " << p << ": starts at "
       << (p == 0 ? "the model's inputs"
                  : st.startsAt.empty() ? "(no named node)"
                                        : "'" + st.startsAt + "'")
       << "; recompute " << st.recompute << ", offload "
       << (st.offload ? "activations to host" : "none") << "; memory "
       << st.arenaBytes << " bytes per device";
    if (st.hostBytes)
      os << " + " << st.hostBytes << " bytes of host pool";
    os << "\n";
    printArenaPeak(os, st);
  }
  if (o.predictedStepSeconds > 0) {
    char buf[64];
    snprintf(buf, sizeof(buf), "%.4g s", o.predictedStepSeconds);
    os << "predicted step time: " << buf << " (" << o.predictionSource
       << ")\n";
  }
  os << "rank map (rank: dp pp tp coordinates; the host of each rank is "
        "decided at launch: smprun prints the rank -> host map):\n";
  for (int64_t r = 0; r < d.grid.numRanks(); ++r) {
    auto c = d.grid.coordOf(r);
    os << "  rank " << r << ": dp " << c[kDataAxis] << ", pp "
       << c[kPipelineAxis] << ", tp " << c[kTensorAxis] << "\n";
  }
  return s;
}

std::string planJson(const PlanDetails &d) {
  const ArtifactOptions &o = *d.options;
  const pb::Manifest &m = *d.manifest;
  llvm::json::Object a;
  a["command"] = o.command;
  a["target"] = o.target;
  a["ranks"] = d.grid.numRanks();
  a["dp"] = d.grid.size[kDataAxis];
  a["tp"] = d.grid.size[kTensorAxis];
  a["pp"] = d.grid.size[kPipelineAxis];
  a["dp_shard"] = d.grid.shardRanks();
  a["placement"] = d.grid.placementLetters();
  a["schedule"] = m.schedule();
  llvm::json::Array inputs;
  for (const auto &in : m.inputs())
    inputs.push_back(llvm::json::Object{{"name", in.name()},
                                        {"dtype", typeName(in.dtype())},
                                        {"shape", shapeJson(in.shape())}});
  a["inputs"] = std::move(inputs);
  if (o.training) {
    const TrainingOptions &t = *o.training;
    a["training"] = llvm::json::Object{
        {"loss", t.loss},
        {"optimizer", t.optimizer},
        {"optimizer_spec", m.training().optimizer_spec()},
        {"lr", t.lr},
        {"lr_schedule", t.lrSchedule},
        {"warmup_steps", t.warmupSteps},
        {"precision", t.precision},
        {"microbatches", t.microbatches}};
    if (!t.storedParameters.empty())
      (*a["training"].getAsObject())["stored_parameters"] = t.storedParameters;
  }
  llvm::json::Array stages;
  for (size_t p = 0; p < d.stages.size(); ++p) {
    const PlanDetails::Stage &st = d.stages[p];
    stages.push_back(llvm::json::Object{
        {"stage", static_cast<int64_t>(p)},
        {"starts_at",
         p == 0 ? llvm::json::Value(nullptr) : llvm::json::Value(st.startsAt)},
        {"recompute", st.recompute},
        {"offload", st.offload},
        {"arena_bytes", static_cast<int64_t>(st.arenaBytes)},
        {"host_pool_bytes", static_cast<int64_t>(st.hostBytes)},
        {"weights_bytes", static_cast<int64_t>(st.weightsBytes)},
        {"peak_live_bytes", static_cast<int64_t>(st.peak.liveBytes)},
        {"peak_instruction", st.peak.instruction}});
  }
  a["stages"] = std::move(stages);
  llvm::json::Array rankMap;
  for (int64_t r = 0; r < d.grid.numRanks(); ++r) {
    auto c = d.grid.coordOf(r);
    rankMap.push_back(llvm::json::Object{{"rank", r},
                                         {"dp", c[kDataAxis]},
                                         {"pp", c[kPipelineAxis]},
                                         {"tp", c[kTensorAxis]},
                                         {"host", nullptr}});
  }
  a["rank_map"] = std::move(rankMap);
  a["hosts"] = "decided at launch (smprun prints the rank -> host map)";
  if (o.predictedStepSeconds > 0)
    a["predicted_step_seconds"] = o.predictedStepSeconds;
  if (!o.predictionSource.empty())
    a["prediction"] = o.predictionSource;
  llvm::json::Object top;
  if (!o.plannerJson.empty()) {
    auto parsed = llvm::json::parse(o.plannerJson);
    if (!parsed)
      llvm::consumeError(parsed.takeError());
    else if (auto *obj = parsed->getAsObject())
      top = std::move(*obj);
  }
  top["artifact"] = std::move(a);
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(top))) << "\n";
  return out;
}

} // namespace smp::writer
