//===- Options.h - smpc's command line --------------------------*- C++ -*-===//

#ifndef SMPC_OPTIONS_H
#define SMPC_OPTIONS_H

#include "smp/Frontend/ONNX/Importer.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

struct Options {
  std::string command;
  std::string input;
  std::string output = "-";
  std::string target = "cpu";
  bool train = false;
  std::string loss, optimizer = "sgd", lrSchedule = "constant", freeze;
  std::string precision = "fp32";
  int64_t dp = 1, devices = 0, pp = 1, tp = 1, microbatches = 0, virtualStages = 1;
  std::string schedule = "1f1b", placement = "cluster", ppCuts;
  std::string bnStats = "global"; // --bn-stats
  bool dpGiven = false, tpGiven = false, ppGiven = false, scheduleGiven = false,
       noZero = false; // --no-shard-optimizer-state (planner: pinned off)
  /// smpc plan (and compile --devices N without pinned degrees).
  std::string cluster, jsonOutput, svgOutput, profileDb;
  bool autoPlan = false, noExactMemory = false;
  std::string recomputeGiven; // --checkpoint-activations, for the planner
  bool offloadGiven = false;  // --offload-activations
  std::string autoPlanJson, autoPlanSvg;
  std::string optimize = "speed"; // what the planner minimises: speed|memory
  int64_t globalBatch = 0, microbatchSize = 0;
  bool zero = false;
  bool emitMlir = false, printAfterAll = false;
  double lr = 1e-3;
  int64_t warmupSteps = 0;
  /// The flags given on the command line (without their values), so that a
  /// flag that would have no effect in this combination can be refused.
  std::set<std::string> given;
  /// Numeric training flags by name (without "--"), as given.
  std::map<std::string, double> numbers;
  /// Pass options of smp-build-train-step given on the command line.
  std::vector<std::string> trainOptions;
  smp::onnx_frontend::ImportOptions import;
};

/// Prints "smpc: error: MSG"; returns the exit code 1.
int fail(const llvm::Twine &msg);

/// Parses argv; returns an exit code when the program should stop (help,
/// version, a bad flag).
std::optional<int> parseArgs(int argc, char **argv, Options &opts);

/// Checks and derives the parallel degrees and each rank's batch (called by
/// parseArgs, and again after the planner has chosen them); returns an exit
/// code on a bad combination.
std::optional<int> finishParallelOptions(Options &opts);

#endif // SMPC_OPTIONS_H
