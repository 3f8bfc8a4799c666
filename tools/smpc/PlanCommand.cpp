//===- PlanCommand.cpp - smpc plan ----------------------------------------===//

#include "PlanCommand.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "smp/Planner/Planner.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/ToolOutputFile.h"
#include "mlir/Support/FileUtilities.h"

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
  if (cmd.precision != "fp32") {
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    smp::SmpMixedPrecisionPassOptions options;
    options.precision = cmd.precision;
    pm.nest<func::FuncOp>().addPass(smp::createSmpMixedPrecisionPass(options));
    if (failed(pm.run(module))) {
      fail("cannot apply --precision " + cmd.precision);
      return std::nullopt;
    }
  }
  smp::PlanRequest req;
  req.devices = cmd.devices;
  req.globalBatch = cmd.globalBatch;
  req.device = *device;
  req.optimizer = cmd.optimizer == "sgd" ? "sgd" : cmd.optimizer;
  req.dp = cmd.dp;
  req.tp = cmd.tp;
  req.pp = cmd.pp;
  req.microbatchSize = cmd.microbatchSize;
  req.virtualStages = cmd.virtualStages;
  req.schedule = cmd.schedule;
  req.zero = cmd.zero;
  auto result = smp::choosePlan(module, req, vocabOutput(module, cmd.loss));
  if (!result) {
    fail(llvm::toString(result.takeError()));
    return std::nullopt;
  }
  return std::make_pair(std::move(*result), req);
}

std::optional<smp::Plan> choosePlanForCompile(ModuleOp module,
                                              const PlanCommand &cmd,
                                              std::string &json) {
  auto planned = plan(module, cmd);
  if (!planned)
    return std::nullopt;
  json = smp::planResultJson(planned->first, planned->second);
  return planned->first.best;
}

int runPlan(ModuleOp module, const PlanCommand &cmd) {
  auto planned = plan(module, cmd);
  if (!planned)
    return 1;
  auto *result = &planned->first;
  const smp::PlanRequest &req = planned->second;
  llvm::outs() << smp::formatPlanResult(*result, req);
  if (!cmd.jsonOutput.empty()) {
    std::string err;
    auto out = openOutputFile(cmd.jsonOutput, &err);
    if (!out)
      return fail(cmd.jsonOutput + ": " + err);
    out->os() << smp::planResultJson(*result, req);
    out->keep();
  }
  return 0;
}
