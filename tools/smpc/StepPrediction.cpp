//===- StepPrediction.cpp - The compiled plan's predicted step time -------===//

#include "StepPrediction.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Analysis/Cost/CostModel.h"
#include "smp/Analysis/Cost/PipelineTime.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

using namespace mlir;

namespace {

/// The pipeline's rank functions by pipeline rank; empty when the step is
/// not pipelined (one train_step, or `main` for inference).
llvm::SmallVector<func::FuncOp> pipelineRanks(ModuleOp module) {
  llvm::SmallVector<func::FuncOp> ranks;
  for (auto f : module.getOps<func::FuncOp>()) {
    auto r = f->getAttrOfType<IntegerAttr>(smp::SmpDialect::kPipelineRankAttr);
    if (!r)
      continue;
    size_t at = static_cast<size_t>(r.getInt());
    if (ranks.size() <= at)
      ranks.resize(at + 1);
    ranks[at] = f;
  }
  if (llvm::any_of(ranks, [](func::FuncOp f) { return !f; }))
    return {};
  return ranks;
}

} // namespace

CompiledStepTime compiledStepTime(ModuleOp module, bool training,
                                  const smp::DeviceSpec &device,
                                  const smp::ProfileDB *profile) {
  CompiledStepTime t;
  t.how = "slowest rank";
  llvm::SmallVector<func::FuncOp> ranks = pipelineRanks(module);
  smp::PipelineEstimate pipe;
  if (!ranks.empty())
    pipe = smp::estimatePipeline(ranks, device, profile);
  if (!ranks.empty() && pipe.error.empty()) {
    // The ranks' programs side by side, each receive waiting for its
    // message: unequal stages and the schedule's order priced as compiled.
    t.seconds = pipe.stepSeconds, t.measured = pipe.measuredOps,
    t.modelled = pipe.modelledOps;
    char buf[96];
    snprintf(buf, sizeof(buf), "%zu pipeline ranks side by side, bubble %.1f%%",
             ranks.size(), 100 * pipe.bubble());
    t.how = buf;
    return t;
  }
  if (!pipe.error.empty())
    llvm::errs() << "smpc: warning: the pipeline's ranks do not finish in "
                    "the step-time model ("
                 << pipe.error << "); predicting the slowest rank alone\n";
  for (auto f : module.getOps<func::FuncOp>()) {
    if (f.getSymName() == "main" && training)
      continue;
    smp::StepEstimate e = smp::estimateFunction(f, device, profile);
    t.seconds = std::max(t.seconds, e.totalSeconds());
    t.measured += e.measuredOps;
    t.modelled += e.modelledOps;
  }
  return t;
}

int predictStepTime(ModuleOp module, const Options &opts,
                    smp::ArtifactOptions &artifact) {
  smp::ProfileDB db;
  llvm::SmallVector<llvm::StringRef> files;
  if (!opts.profileDb.empty())
    llvm::StringRef(opts.profileDb).split(files, ',');
  for (llvm::StringRef f : files)
    if (auto err = db.addFile(f))
      return fail(llvm::toString(std::move(err)));
  auto device = smp::loadDeviceSpec(
      opts.cluster.empty() ? (opts.target == "cuda" ? "h100-sxm-80g" : "cpu")
                           : opts.cluster);
  if (!device)
    return fail(llvm::toString(device.takeError()));
  CompiledStepTime t = compiledStepTime(module, opts.train, *device,
                                        files.empty() ? nullptr : &db);
  artifact.predictedStepSeconds = t.seconds;
  artifact.predictionSource =
      t.how + "; " +
      (files.empty()
           ? "the cost model's roofline of " + device->name
           : std::to_string(t.measured) + " ops measured in --profile-db, " +
                 std::to_string(t.modelled) + " modelled");
  if (!files.empty()) {
    char buf[256];
    snprintf(buf, sizeof(buf),
             "predicted step time: %.4g s (%s; %zu ops measured in the "
             "profile, %zu modelled)\n",
             t.seconds, t.how.c_str(), t.measured, t.modelled);
    llvm::outs() << buf;
  }
  return 0;
}
