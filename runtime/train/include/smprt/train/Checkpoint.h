//===- Checkpoint.h - Atomic training checkpoints ---------------*- C++ -*-===//

#ifndef SMPRT_TRAIN_CHECKPOINT_H
#define SMPRT_TRAIN_CHECKPOINT_H

#include "smprt/exec/Executor.h"
#include "smprt/train/Resume.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace smprt {

/// Saves every parameter and optimizer-state buffer of `exec` by name, after
/// `step` completed steps of a `totalSteps` run, into `dir` atomically (see
/// checkpoint.proto). Returns the new checkpoint's directory in `written`.
/// In a run of several ranks (exec.communicator()) it is collective: every
/// rank writes its own files, rank 0 publishes the checkpoint once all have
/// succeeded, and every rank returns the same success or failure. `dir` must
/// be a directory every rank sees (a shared file system across machines).
/// `record` is what the checkpoint records of the run (Resume.h); without
/// it, the artifact's (runRecordOf).
Status saveCheckpoint(const Executor &exec, const std::string &dir,
                      int64_t step, int64_t totalSteps, std::string &written);
Status saveCheckpoint(const Executor &exec, const std::string &dir,
                      int64_t step, int64_t totalSteps, const RunRecord &record,
                      std::string &written);

/// Removes what a save that did not finish left in `dir` (a run killed or
/// out of disk space while saving): `.tmp-step-*` directories and
/// `latest.tmp`. Published checkpoints and `latest` are not touched. Rank 0
/// calls it before training starts.
void removeStaleCheckpointTemps(const std::string &dir);

/// Loads the newest checkpoint in `dir` into the parameter and state buffers
/// of `exec`: every rank reads every rank's index and tensors (checksums
/// verified), checks the checkpoint against the artifact (checkResume:
/// model, optimizer, batch; `options` says what to reset) before any buffer
/// is touched, gathers each of its tensors whole and takes its own slice.
/// With options.resetOptimizer the optimizer state keeps its initial
/// values. `info` says what was resumed (step, total steps, the writer's
/// record, warnings).
Status loadCheckpoint(Executor &exec, const std::string &dir,
                      const ResumeOptions &options, ResumeInfo &info);

/// A checkpoint's index, as `smp-checkpoint list` shows it.
struct CheckpointSummary {
  std::string checkpoint; // DIR/step-<N>
  int64_t step = 0, totalSteps = 0;
  uint32_t numRanks = 1;
  std::string modelName;
  RunRecord record;
  struct Tensor {
    std::string name, role;
    std::string kind; // of a param: "" (trained), "buffer" or "frozen"
    uint32_t dtype = 0;
    std::vector<int64_t> shape; // global
    uint64_t bytes = 0;         // of the global tensor
    uint32_t shards = 0;        // pieces over the ranks
  };
  std::vector<Tensor> tensors; // by name
};

/// Reads (and checks the checksums of) the newest checkpoint in `dir`.
Status summarizeCheckpoint(const std::string &dir, CheckpointSummary &out);

/// A tensor gathered whole from every rank's shards.
struct GlobalTensor {
  uint32_t dtype = 0;
  std::vector<int64_t> shape;
  std::string bytes;
};

/// The tensors of role `role` ("param", "state") of the newest checkpoint in
/// `dir`, each gathered whole from the shards of every rank that wrote it.
Status readGlobalTensors(const std::string &dir, const std::string &role,
                         std::map<std::string, GlobalTensor> &out);

} // namespace smprt

#endif // SMPRT_TRAIN_CHECKPOINT_H
