//===- PlanCommand.h - smpc plan --------------------------------*- C++ -*-===//

#ifndef SMPC_PLANCOMMAND_H
#define SMPC_PLANCOMMAND_H

#include "mlir/IR/BuiltinOps.h"
#include "smp/Planner/Planner.h"

#include <functional>
#include <optional>
#include <vector>
#include <string>

struct PlanCommand {
  int64_t devices = 1, globalBatch = 1;
  std::string cluster, loss, optimizer = "adamw", precision = "fp32",
      jsonOutput, svgOutput, optimize = "speed";
  std::optional<int64_t> dp, tp, pp, microbatchSize, microbatches,
      virtualStages;
  std::optional<std::string> schedule;
  std::optional<int> zeroStage;
  std::optional<int64_t> shardedDp;
  /// ZeRO-3's gather prefetch (--gather-prefetch); unset: the default of
  /// the backend the cluster's devices run (smp::kDefaultGatherPrefetch
  /// where they overlap communication, else 0).
  std::optional<int64_t> gatherPrefetch;
  /// The gradient buckets in MiB (--bucket-mb; unset: the compiler's 25).
  std::optional<double> bucketMb;
  std::optional<bool> sequenceParallel;
  std::optional<bool> recompute, offload;
  /// --master-weights fp32; --freeze (parameters not trained).
  bool masterWeights = false;
  std::string freeze;
  /// Fraction of device memory a plan may use (smp::PlanRequest's default
  /// unless a compiled plan went over it: smpc compile --devices N).
  std::optional<double> memoryFraction;
};

/// The chosen plan as the compiler builds it: the arena each pipeline rank
/// gets from the memory plan, and the compiled step's time on the plan's
/// device (its ranks side by side, StepPrediction.h).
struct CompiledPlan {
  std::vector<uint64_t> arenas;
  double stepSeconds = 0;
};

/// Plans the training of `module` (imported at one sample per batch) and
/// prints the plan; returns the exit code.
/// `compiled`, when given, builds the chosen plan (nullopt: not known, e.g.
/// a model too large to build in a moment); its figures are printed against
/// the planner's.
int runPlan(mlir::ModuleOp module, const PlanCommand &cmd,
            const std::function<std::optional<CompiledPlan>(const smp::Plan &)>
                &compiled = nullptr);

/// The planner's choice for `smpc compile --devices N` (errors printed);
/// `json` gets the report.
std::optional<smp::Plan> choosePlanForCompile(mlir::ModuleOp module,
                                              const PlanCommand &cmd,
                                              std::string &json,
                                              std::string &svg);

#endif // SMPC_PLANCOMMAND_H
