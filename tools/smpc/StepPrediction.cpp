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
  const smp::ProfileDB *profile = files.empty() ? nullptr : &db;
  double step = 0;
  size_t measured = 0, modelled = 0;
  std::string how = "slowest rank";
  llvm::SmallVector<func::FuncOp> ranks = pipelineRanks(module);
  smp::PipelineEstimate pipe;
  if (!ranks.empty())
    pipe = smp::estimatePipeline(ranks, *device, profile);
  if (!ranks.empty() && pipe.error.empty()) {
    // The ranks' programs side by side, each receive waiting for its
    // message: unequal stages and the schedule's order priced as compiled.
    step = pipe.stepSeconds, measured = pipe.measuredOps,
    modelled = pipe.modelledOps;
    char buf[96];
    snprintf(buf, sizeof(buf), "%zu pipeline ranks side by side, bubble %.1f%%",
             ranks.size(), 100 * pipe.bubble());
    how = buf;
  } else {
    if (!pipe.error.empty())
      llvm::errs() << "smpc: warning: the pipeline's ranks do not finish in "
                      "the step-time model ("
                   << pipe.error << "); predicting the slowest rank alone\n";
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.getSymName() == "main" && opts.train)
        continue;
      smp::StepEstimate e = smp::estimateFunction(f, *device, profile);
      step = std::max(step, e.totalSeconds());
      measured += e.measuredOps;
      modelled += e.modelledOps;
    }
  }
  artifact.predictedStepSeconds = step;
  artifact.predictionSource =
      how + "; " +
      (files.empty()
           ? "the cost model's roofline of " + device->name
           : std::to_string(measured) + " ops measured in --profile-db, " +
                 std::to_string(modelled) + " modelled");
  if (!files.empty()) {
    char buf[256];
    snprintf(buf, sizeof(buf),
             "predicted step time: %.4g s (%s; %zu ops measured in the "
             "profile, %zu modelled)\n",
             step, how.c_str(), measured, modelled);
    llvm::outs() << buf;
  }
  return 0;
}
