//===- PlanCommand.cpp - smpc plan ----------------------------------------===//

#include "PlanCommand.h"
#include "StoredPrecision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Pipelines/PipelineDefaults.h"
#include "smp/Pipelines/Pipelines.h"
#include "smp/Planner/Planner.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {

int fail(const llvm::Twine &msg) {
  llvm::errs() << "smpc: error: " << msg << "\n";
  return 1;
}

/// The output a cross-entropy reads: the one --loss names, else "logits"
/// when the model has it.
std::string vocabOutput(ModuleOp module, const std::string &loss) {
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(loss).split(parts, ':');
  if (parts.size() == 3 && parts[0] == "cross_entropy")
    return parts[1].str();
  if (!loss.empty())
    return "";
  auto main = module.lookupSymbol<func::FuncOp>("main");
  for (unsigned i = 0; main && i < main.getNumResults(); ++i)
    if (auto n = main.getResultAttrOfType<StringAttr>(i, smp::SmpDialect::kOutputAttr))
      if (n.getValue() == "logits")
        return "logits";
  return "";
}

} // namespace

/// Runs the planner for `cmd`; prints errors.
static std::optional<std::pair<smp::PlanResult, smp::PlanRequest>>
plan(ModuleOp module, const PlanCommand &cmd) {
  auto device = smp::loadDeviceSpec(cmd.cluster);
  if (!device) {
    fail(llvm::toString(device.takeError()));
    return std::nullopt;
  }
  smp::PlanRequest req;
  req.devices = cmd.devices;
  req.globalBatch = cmd.globalBatch;
  req.device = *device;
  req.optimizer = cmd.optimizer;
  req.loss = cmd.loss;
  req.precision = cmd.precision;
  // As compile builds the step: a model storing 16-bit parameters computes
  // in its own types (StoredPrecision.h).
  if (smpc::storedPrecision(module, cmd.freeze).any16Bit())
    req.precision = "fp32";
  req.masterWeights = cmd.masterWeights;
  req.dp = cmd.dp;
  req.tp = cmd.tp;
  req.pp = cmd.pp;
  req.microbatchSize = cmd.microbatchSize;
  req.microbatches = cmd.microbatches;
  req.virtualStages = cmd.virtualStages;
  req.schedule = cmd.schedule;
  req.zeroStage = cmd.zeroStage;
  req.shardedDp = cmd.shardedDp;
  req.gatherPrefetch = cmd.gatherPrefetch.value_or(
      device->overlapsCommunication ? smp::kDefaultGatherPrefetch : 0);
  if (cmd.bucketMb)
    req.bucketBytes = *cmd.bucketMb * 1024 * 1024;
  req.sequenceParallel = cmd.sequenceParallel;
  req.recompute = cmd.recompute;
  req.offload = cmd.offload;
  req.minimizeMemory = cmd.optimize == "memory";
  if (cmd.memoryFraction)
    req.memoryFraction = *cmd.memoryFraction;
  auto result = smp::choosePlan(module, req, vocabOutput(module, cmd.loss));
  if (!result) {
    fail(llvm::toString(result.takeError()));
    return std::nullopt;
  }
  return std::make_pair(std::move(*result), req);
}

std::optional<smp::Plan> choosePlanForCompile(ModuleOp module,
                                              const PlanCommand &cmd,
                                              std::string &json,
                                              std::string &svg) {
  auto planned = plan(module, cmd);
  if (!planned)
    return std::nullopt;
  json = smp::planResultJson(planned->first, planned->second);
  svg = smp::planReportSvg(planned->first, planned->second);
  return planned->first.best;
}

int runPlan(ModuleOp module, const PlanCommand &cmd,
            const std::function<std::optional<CompiledPlan>(const smp::Plan &)>
                &compiled) {
  auto planned = plan(module, cmd);
  if (!planned)
    return 1;
  auto *result = &planned->first;
  const smp::PlanRequest &req = planned->second;
  llvm::outs() << smp::formatPlanResult(*result, req);
  std::optional<CompiledPlan> exact;
  if (compiled)
    exact = compiled(result->best);
  // How far the planner's estimate is from the compiled figure (> 0).
  auto off = [](double estimate, double exact) {
    return llvm::format("%+.1f%%", 100.0 * (estimate - exact) / exact);
  };
  if (exact) {
    llvm::outs() << "  memory plan of this plan (each rank's arena, from the "
                    "compiler's liveness-based plan):";
    uint64_t peak = 0;
    for (uint64_t b : exact->arenas) {
      llvm::outs() << " " << b;
      peak = std::max(peak, b);
    }
    llvm::outs() << " bytes; the estimate above is "
                 << off(result->best.peakMemory,
                        std::max<double>(static_cast<double>(peak), 1))
                 << " off\n";
  }
  if (exact && exact->stepSeconds > 0)
    llvm::outs() << "  step of the compiled plan (its ranks' programs side by "
                    "side, on the same device): "
                 << llvm::format("%.4g", exact->stepSeconds)
                 << " s; the estimate above is "
                 << off(result->best.stepSeconds, exact->stepSeconds)
                 << " off\n";
  if (!cmd.svgOutput.empty()) {
    std::string err;
    auto out = openOutputFile(cmd.svgOutput, &err);
    if (!out)
      return fail(cmd.svgOutput + ": " + err);
    out->os() << smp::planReportSvg(*result, req);
    out->keep();
  }
  if (!cmd.jsonOutput.empty()) {
    std::string err;
    auto out = openOutputFile(cmd.jsonOutput, &err);
    if (!out)
      return fail(cmd.jsonOutput + ": " + err);
    std::string json = smp::planResultJson(*result, req);
    if (exact) {
      // Add the exact per-rank arenas and the compiled step to the report.
      auto parsed = llvm::json::parse(json);
      if (parsed && parsed->getAsObject()) {
        llvm::json::Array arenas;
        for (uint64_t b : exact->arenas)
          arenas.push_back(static_cast<int64_t>(b));
        (*parsed->getAsObject())["memory_plan_bytes"] = std::move(arenas);
        if (exact->stepSeconds > 0)
          (*parsed->getAsObject())["compiled_step_seconds"] =
              exact->stepSeconds;
        std::string s;
        llvm::raw_string_ostream os(s);
        os << llvm::formatv("{0:2}", *parsed) << "\n";
        json = s;
      }
    }
    out->os() << json;
    out->keep();
  }
  return 0;
}
