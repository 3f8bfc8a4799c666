//===- BatchNormMicrobatches.cpp - Batch norms and micro-batches ----------===//

#include "BatchNormMicrobatches.h"

#include "Options.h"
#include "PlanCommand.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/IR/TrainedParams.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace smpc {
namespace {

/// "8 BatchNorms normalise" / "1 BatchNorm normalises".
std::string normsPhrase(int64_t count) {
  return count == 1 ? "1 BatchNorm normalises"
                    : std::to_string(count) + " BatchNorms normalise";
}

/// The samples one batch norm normalises over, a step split into `m`
/// micro-batches: every replica's j-th micro-batch (global statistics) or
/// the replica's own (replica).
int64_t samplesPerNorm(const Options &opts, int64_t m) {
  int64_t replicas = opts.plan.bnStats == "replica" ? opts.plan.dp : 1;
  return opts.import.globalBatch / (replicas * m);
}

} // namespace

BatchStatisticNorms batchStatisticNorms(ModuleOp module, StringRef bnStats) {
  BatchStatisticNorms norms;
  if (bnStats == "running")
    return norms;
  module.walk([&](smp::BatchNormOp bn) {
    if (smp::computesOwnStatistics(bn))
      return; // its statistics computed in the graph, which SampleDims reads
    if (!norms.first)
      norms.first = bn;
    ++norms.count;
  });
  return norms;
}

void planBatchNormMicrobatches(ModuleOp module, const Options &opts,
                               PlanCommand &cmd, bool note) {
  if (cmd.microbatches || cmd.microbatchSize)
    return;
  BatchStatisticNorms norms = batchStatisticNorms(module, opts.plan.bnStats);
  if (!norms.count)
    return;
  cmd.microbatches = 1;
  if (note)
    llvm::errs()
        << "smpc: note: " << opts.input
        << ": planning one micro-batch a step: " << normsPhrase(norms.count)
        << " with the batch's statistics, and micro-batches would each "
           "normalise over fewer samples (pin --microbatches M to train so, "
           "as PyTorch with gradient accumulation)\n";
}

std::optional<int> checkBatchNormMicrobatches(ModuleOp module,
                                              const Options &opts) {
  int64_t m = opts.plan.microbatches;
  if (!opts.train || m <= 1)
    return std::nullopt;
  BatchStatisticNorms norms = batchStatisticNorms(module, opts.plan.bnStats);
  if (!norms.count)
    return std::nullopt;
  int64_t whole = samplesPerNorm(opts, 1), part = samplesPerNorm(opts, m);
  const char *of = opts.plan.bnStats == "replica"
                       ? "each replica's share of the step"
                       : "one device's step";
  if (!opts.pinned.microbatches) {
    norms.first->emitError(llvm::formatv(
        "{0} with the batch's statistics, and --pp {1} runs {2} micro-batches "
        "a step unless --microbatches says otherwise: each would normalise "
        "over {3} samples, not over the {4} of {5} (PyTorch with gradient "
        "accumulation over {2} micro-batches), another model. Pass "
        "--microbatches {2} to train so, --microbatches 1 for the step's "
        "statistics, or --bn-stats running (statistics frozen)",
        normsPhrase(norms.count), opts.plan.pp, m, part, whole, of));
    return 1;
  }
  norms.first->emitWarning(llvm::formatv(
      "{0} over each micro-batch's {1} samples (--microbatches {2}), not "
      "over the {3} of {4}: as PyTorch with gradient accumulation over {2} "
      "micro-batches",
      normsPhrase(norms.count), part, m, whole, of));
  return std::nullopt;
}

} // namespace smpc
