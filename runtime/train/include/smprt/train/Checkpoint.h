//===- Checkpoint.h - Atomic training checkpoints ---------------*- C++ -*-===//

#ifndef SMPRT_TRAIN_CHECKPOINT_H
#define SMPRT_TRAIN_CHECKPOINT_H

#include "smprt/exec/Executor.h"
#include "smprt/train/Schedule.h"

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
/// `schedule`, when given, is recorded for resumed runs to continue.
Status saveCheckpoint(const Executor &exec, const std::string &dir,
                      int64_t step, int64_t totalSteps, std::string &written,
                      const LrSchedule *schedule = nullptr);

/// Removes what a save that did not finish left in `dir` (a run killed or
/// out of disk space while saving): `.tmp-step-*` directories and
/// `latest.tmp`. Published checkpoints and `latest` are not touched. Rank 0
/// calls it before training starts.
void removeStaleCheckpointTemps(const std::string &dir);

/// Loads the newest checkpoint in `dir` into the parameter and state buffers
/// of `exec` (names, dtypes and shapes must match; checksums are verified
/// before any buffer is touched): each rank reads its own files, which must
/// have been written by a run of as many ranks. Returns the completed step
/// count and the total steps it was written for, and in `schedule` the
/// learning-rate schedule it recorded (none in older checkpoints), and in
/// `path` the checkpoint directory it loaded.
Status loadCheckpoint(Executor &exec, const std::string &dir, int64_t &step,
                      int64_t &totalSteps,
                      std::optional<smp::artifact::LrSchedule> *schedule =
                          nullptr,
                      std::string *path = nullptr);

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
