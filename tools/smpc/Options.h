//===- Options.h - smpc's command line --------------------------*- C++ -*-===//

#ifndef SMPC_OPTIONS_H
#define SMPC_OPTIONS_H

#include "smp/Frontend/ONNX/Importer.h"
#include "smp/Pipelines/Pipelines.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

struct Options {
  /// The arguments as given (after --config expansion).
  std::vector<std::string> argv;
  std::string command;
  std::string input;
  std::string output = "-";
  std::string target = "cpu";
  bool train = false;
  /// The training plan (the resolved degrees) and the training options: what
  /// smp::buildTrainingPipeline gets.
  smp::TrainingPipelineOptions plan;
  /// What the command line pins for the planner (the rest it searches);
  /// unset: not given.
  struct Pinned {
    std::optional<int64_t> dp, tp, pp, microbatches;
    std::optional<std::string> schedule;
    /// --checkpoint-activations: none, full, selective or auto.
    std::optional<std::string> recompute;
    /// The ZeRO stage: --zero-stage N, --shard-optimizer-state (1) or
    /// --no-shard-optimizer-state (0); `zeroFlag` is the flag as given.
    std::optional<int> zeroStage;
    std::string zeroFlag;
    /// --sharded-dp S: hybrid sharding over groups of S data-parallel ranks.
    std::optional<int64_t> shardedDp;
    /// --sequence-parallel (true) or --no-sequence-parallel (false).
    std::optional<bool> sequenceParallel;
    /// --offload-activations.
    std::optional<bool> offload;
  } pinned;
  std::string lrSchedule = "constant";
  /// --hf-no-decay: the Hugging Face Trainer's parameter groups
  /// (TrainerGroups.h) instead of a --no-decay regex.
  bool hfNoDecay = false;
  int64_t devices = 0;
  std::string placement = "cluster", ppCuts;
  /// smpc plan (and compile --devices N without pinned degrees).
  std::string cluster, jsonOutput, svgOutput, profileDb;
  bool autoPlan = false, noExactMemory = false;
  /// An auto-planned compile: what compile() checks each rank's compiled
  /// arena against before it writes the artifact (the planner's limit, and
  /// its estimate of the chosen plan's peak, for the message).
  struct PlannedMemory {
    double limitBytes = 0, estimateBytes = 0, deviceBytes = 0;
    std::string summary; // the chosen plan, as the planner prints it
  };
  std::optional<PlannedMemory> plannedMemory;
  /// --max-plans: the plans compile --devices N tries when a compiled plan is
  /// over the planner's limit.
  int64_t maxPlans = 3;
  std::string autoPlanJson, autoPlanSvg;
  std::string optimize = "speed"; // what the planner minimises: speed|memory
  int64_t globalBatch = 0, microbatchSize = 0;
  bool emitMlir = false, printAfterAll = false;
  double lr = 1e-3;
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0; // 0: the run's --steps (smprun)
  int64_t evalEvery = 0;  // smprun --eval-data's default --eval-every
  double evalDelay = 0;   // --eval-delay: no evaluation before (steps/epochs)
  bool evalOnStart = false; // --eval-on-start: also before the first step
  bool shiftLabels = false; // --shift-labels: smprun shifts them (HF's)
  int64_t evalBatch = 0;    // --eval-batch-size (0: the global batch)
  /// --seed: what the dropout masks are drawn from.
  uint64_t seed = 0;
  /// DeepSpeed's schedules: --warmup-type, --warmup-min-lr or
  /// --warmup-min-ratio, --cos-min-ratio (DeepSpeed's defaults).
  std::string warmupType = "log";
  double warmupMin = 0, cosMinRatio = 0.0001;
  /// The flags given on the command line (without their values), so that a
  /// flag that would have no effect in this combination can be refused.
  std::set<std::string> given;
  /// Numeric training flags by name (without "--"), as given.
  std::map<std::string, double> numbers;
  smp::onnx_frontend::ImportOptions import;
};

/// Prints "smpc: error: MSG"; returns the exit code 1.
int fail(const llvm::Twine &msg);

/// Whether the planner chooses the plan: devices without any pinned degree,
/// or recomputation left to it.
bool plannerChooses(const Options &opts);

/// Refuses flags that would have no effect, or another effect than they say,
/// in this command line (before the degrees are derived); OptionChecks.cpp.
std::optional<int> checkFlagCombinations(const Options &opts);

/// The same checks for what needs the derived degrees.
std::optional<int> checkDegreeFlags(const Options &opts);

/// Parses argv; returns an exit code when the program should stop (help,
/// version, a bad flag).
std::optional<int> parseArgs(int argc, char **argv, Options &opts);

/// Checks and derives the parallel degrees and each rank's batch (called by
/// parseArgs, and again after the planner has chosen them); returns an exit
/// code on a bad combination.
std::optional<int> finishParallelOptions(Options &opts);

/// ZeRO-3's gather prefetch: --gather-prefetch, else the target's default
/// (smp::kDefaultGatherPrefetch on CUDA, whose communication stream runs
/// prefetched gathers beside compute; 0 on the CPU, whose collectives
/// block and would only hold copies).
int64_t gatherPrefetchOf(const Options &opts);

#endif // SMPC_OPTIONS_H
