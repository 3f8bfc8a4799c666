//===- Trainer.h - The training loop of smprun ------------------*- C++ -*-===//

#ifndef SMPRT_TRAIN_TRAINER_H
#define SMPRT_TRAIN_TRAINER_H

#include "smprt/Base.h"
#include "smprt/exec/Executor.h"

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace smprt {

struct TrainOptions {
  int64_t steps = 0;
  std::string dataDir;
  std::string metricsPath; // one JSON object per step (JSON lines)
  bool progress = false;   // a live progress line (on a terminal)
  std::string checkpointDir;
  // Every K steps; 0 with a checkpointDir: once, after the last step.
  int64_t checkpointEvery = 0;
  bool resume = false; // continue from checkpointDir's latest
  // What --resume accepts when the checkpoint disagrees with the artifact.
  bool resetOptimizer = false, resetData = false;
  // Called with the line saying what was resumed (warning false) and each
  // warning about what could not be checked (warning true).
  std::function<void(bool warning, const std::string &line)> report;
};

/// The learning rate of 0-based step `k` of `total`: linear warmup over the
/// first `warmup` steps, then constant or cosine decay to 0 (the same
/// function the PyTorch reference feeds to LambdaLR).
double learningRate(const smp::artifact::TrainingConfig &config, int64_t k,
                    int64_t total);

/// Per-step results.
struct StepRecord {
  int64_t step;
  double loss, lr, gradNorm, samplesPerSecond;
  uint64_t peakBytes;
  bool skipped = false; // fp16: gradients overflowed, no update
  double lossScale = 0; // fp16: the scale used this step
};

/// Runs `steps` training steps of a training artifact: each step takes the
/// next batch of samples (the leading dim of each .npy in dataDir, wrapping
/// around), feeds the learning rate and step number, and records the loss.
/// Stops with an error naming the step if the loss or the gradient norm is
/// not finite.
Status train(Executor &exec, const TrainOptions &options,
             std::vector<StepRecord> &records);

} // namespace smprt

#endif // SMPRT_TRAIN_TRAINER_H
