//===- Trainer.h - The training loop of smprun ------------------*- C++ -*-===//

#ifndef SMPRT_TRAIN_TRAINER_H
#define SMPRT_TRAIN_TRAINER_H

#include "smprt/Base.h"
#include "smprt/exec/Executor.h"
#include "smprt/train/Progress.h"

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace smprt {

struct TrainOptions {
  int64_t steps = 0;
  std::string dataDir;
  /// Rank 0 reports: the step lines on stdout, progress on stderr, the
  /// metrics and the TensorBoard events (Progress.h); other ranks do not.
  bool report = false;
  ProgressMode progress = ProgressMode::Log;
  int64_t logEvery = 10;   // a progress log line every K steps
  std::string metricsPath; // one JSON object per step (JSON lines)
  std::string tensorboardDir;
  std::string checkpointDir;
  // Every K steps; 0 with a checkpointDir: once, after the last step.
  int64_t checkpointEvery = 0;
  // Held-out samples (one .npy per data input, as dataDir): their loss,
  // computed by the step's forward with dropout off, every evalEvery steps
  // (0: the artifact's TrainingConfig.eval_every, which another value
  // contradicts) and after the last. "": no evaluation.
  std::string evalDir;
  int64_t evalEvery = 0;
  // Where rank 0 writes each evaluation's predictions and their labels
  // (.npy; the artifact must return them: smpc --eval-predictions). "":
  // nowhere.
  std::string evalPredictionsDir;
  bool resume = false; // continue from checkpointDir's latest
  // What --resume accepts when the checkpoint disagrees with the artifact.
  bool resetOptimizer = false, resetData = false;
  // Labels of a cross_entropy loss equal to a data input (the model learns
  // to repeat its input) are refused unless this says they are meant.
  bool allowCopiedLabels = false;
  // So is a mask or token types in the data that the model does not read.
  bool ignoreUnreadData = false;
  // Called before the first step with each line rank 0 says: what was
  // resumed and how samples are converted (warning false), and each warning
  // about what a resume could not check (warning true).
  std::function<void(bool warning, const std::string &line)> onNote;
  // Called on every rank after each step, with the steps done so far (k + 1
  // after 0-based step k; a resumed run counts from its checkpoint), before
  // the step's evaluation and checkpoint: smprun --profile-warmup starts
  // profiling there.
  std::function<void(int64_t done)> afterStep;
};

/// The learning rate of 0-based step `k` of a run of `total` steps under
/// the artifact's schedule (Schedule.h; decay over `total` unless the
/// artifact fixes decay_steps).
double learningRate(const smp::artifact::TrainingConfig &config, int64_t k,
                    int64_t total);

/// How a run stopped early on a signal (Signals.h).
struct TrainStop {
  int signal = 0;         // 0: it did not
  int64_t step = 0;       // the last step done
  std::string checkpoint; // the checkpoint written of it ("" without one)
};

/// Runs `steps` training steps of a training artifact: each step takes the
/// next batch of samples (the leading dim of each .npy in dataDir, wrapping
/// around), feeds the learning rate and step number, and records the loss;
/// with an evalDir, evaluates the held-out samples when due (Evaluate.cpp).
/// Stops with an error naming the step if the loss or the gradient norm is
/// not finite. After every step the ranks agree on a stop request (a
/// signal any rank got, Signals.h): on one, every rank finishes that step,
/// saves a checkpoint when there is a checkpoint directory, fills `stop` and
/// returns success.
Status train(Executor &exec, const TrainOptions &options,
             std::vector<StepRecord> &records, TrainStop *stop = nullptr);

} // namespace smprt

#endif // SMPRT_TRAIN_TRAINER_H
