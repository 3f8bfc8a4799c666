//===- Checkpoint.h - Atomic training checkpoints ---------------*- C++ -*-===//

#ifndef SMPRT_CHECKPOINT_H
#define SMPRT_CHECKPOINT_H

#include "smprt/Executor.h"

#include <string>

namespace smprt {

/// Saves every parameter and optimizer-state buffer of `exec` by name, after
/// `step` completed steps of a `totalSteps` run, into `dir` atomically (see
/// checkpoint.proto). Returns the new checkpoint's directory in `written`.
Status saveCheckpoint(const Executor &exec, const std::string &dir,
                      int64_t step, int64_t totalSteps, std::string &written);

/// Loads the newest checkpoint in `dir` into the parameter and state buffers
/// of `exec` (names, dtypes and shapes must match; checksums are verified
/// before any buffer is touched). Returns the completed step count and the
/// total steps it was written for.
Status loadCheckpoint(Executor &exec, const std::string &dir, int64_t &step,
                      int64_t &totalSteps);

} // namespace smprt

#endif // SMPRT_CHECKPOINT_H
