//===- Resume.h - What a checkpoint must agree on to resume -----*- C++ -*-===//
//
// A checkpoint records, beside its tensors, what the run that wrote it was:
// its optimizer and hyper-parameters, its global batch (the data position
// depends on it), its micro-batches, a fingerprint of its model's
// parameters and its plan (checkpoint.proto fields 50-57). smprun --resume
// compares them with the artifact before any buffer is touched and refuses
// a disagreement with one line naming both values and the flag that accepts
// it; a changed model is always refused.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_RESUME_H
#define SMPRT_TRAIN_RESUME_H

#include "smprt/Base.h"
#include "smprt/exec/Artifact.h"

#include "checkpoint.pb.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace smprt {

/// A parameter of a model: name, dtype and global shape.
struct ParamSpec {
  std::string name;
  uint32_t dtype = 0;
  std::vector<int64_t> shape;
};

/// What a run is, as a checkpoint records it.
struct RunRecord {
  std::string optimizer;        // "adamw(beta1=0.9, ...)"; "": not recorded
  int64_t globalBatch = 0;      // samples per step over the dp ranks
  uint32_t microbatches = 0;    // 0: not recorded
  uint64_t modelFingerprint = 0;
  std::string plan;             // "dp=2 tp=2 pp=2 (DPT), ..." for humans
  std::string artifact;         // the writer's MODEL.smpx
  // The steps the optimizer state and the data position started from (0,
  // or the step a --reset-optimizer / --reset-data resume restarted them).
  int64_t optimizerStartStep = 0, dataStartStep = 0;
  // The learning-rate schedule the run follows (Schedule.h; absent in
  // checkpoints of an older smprun).
  std::optional<smp::artifact::LrSchedule> schedule;
};

/// The parameters the artifact's manifest lists (every rank's, sorted by
/// name); empty for an artifact written by an smpc before the list.
std::vector<ParamSpec> artifactParameters(const Artifact &artifact);

/// A hash of sorted parameters' names, dtypes and shapes.
uint64_t modelFingerprint(const std::vector<ParamSpec> &params);

/// The record of a run of `artifact` (the start steps 0).
RunRecord runRecordOf(const Artifact &artifact);

/// Writes `record` into a checkpoint's index (its run fields), and reads
/// it back.
void setRunRecord(const RunRecord &record, smp::artifact::Checkpoint &index);
RunRecord runRecordFrom(const smp::artifact::Checkpoint &index);

/// "f32[64, 32]".
std::string describeParam(uint32_t dtype, const std::vector<int64_t> &shape);

/// The first difference between a checkpoint's parameters and a model's
/// (both sorted or not; "" when they agree), naming `model`, and how many
/// differences there are in `count`.
std::string modelDifference(const std::vector<ParamSpec> &checkpoint,
                            const std::vector<ParamSpec> &mine,
                            const std::string &model, size_t &count);

/// What --resume is told to accept.
struct ResumeOptions {
  bool resetOptimizer = false; // fresh optimizer state from the resumed step
  bool resetData = false;      // the data position restarts at sample 0
};

/// The outcome of checking a checkpoint against the artifact.
struct ResumeInfo {
  std::string checkpoint;       // DIR/step-<N>
  int64_t step = 0, totalSteps = 0;
  uint32_t numRanks = 1;        // ranks that wrote it
  RunRecord written;            // what the checkpoint records
  RunRecord resumed;            // the resumed run's record (start steps set)
  bool resetOptimizer = false, resetData = false;
  std::vector<std::string> warnings; // what could not be checked
  /// "resumed from DIR/step-N (step 3 of 5; written by 4 ranks: ...)".
  std::string summary() const;
};

/// Checks a checkpoint (its record `written`, its parameters `params`)
/// against `artifact` with `options`: fills `info.resumed` and what was
/// reset, and returns an error naming what differs and the flag to pass.
Status checkResume(const Artifact &artifact, const std::vector<ParamSpec> &params,
                   const ResumeOptions &options, ResumeInfo &info);

/// Whether a checkpoint tensor of role "state" is optimizer state (the
/// momentum buffers and moments, and the optimizer's own step counter; not
/// the loss scaler's @loss_scale, @loss_scale_overflows and @growth_tracker).
bool isOptimizerState(const std::string &name);

} // namespace smprt

#endif // SMPRT_TRAIN_RESUME_H
