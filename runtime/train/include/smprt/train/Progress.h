//===- Progress.h - What rank 0 reports about each step ---------*- C++ -*-===//
//
// Rank 0 reports every step as it finishes, flushed at once (a stopped or
// killed run loses nothing):
//   - stdout: "step K loss L lr R grad_norm G [loss_scale S]" (every step);
//   - stderr: progress, either a live line redrawn every step (a terminal)
//     or a log line every K steps and at the first and last step (a file, a
//     pipe, a launcher), in the style of Megatron-LM's:
//       iteration 10/200 | loss 2.345678 | lr 1.000e-03 | grad norm 0.930 |
//       12345 tokens/s | 0.110 TFLOP/s/device | MFU 95.6% | 85.2 ms/step |
//       elapsed 0:00:01 | ETA 0:00:16
//     (rates and the step time averaged over the steps since the last line);
//   - --metrics FILE: one JSON object per step;
//   - --tensorboard-dir DIR: the step's scalars as a TensorBoard event.
// An evaluation (--eval-data) is reported the same ways (Reporter::
// evaluation).
// Tokens are the samples times the non-batch dims of the first integer input
// of rank >= 2 (token ids [batch, seq]); models without one report samples.
// FLOP/s come from the compiler's cost model of one step (the artifact's
// step_flops: every rank's instructions, recomputation included), MFU from
// the artifact's peak FLOP/s of the device it was compiled for.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_PROGRESS_H
#define SMPRT_TRAIN_PROGRESS_H

#include "smprt/Base.h"
#include "smprt/train/TensorBoard.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace smprt {

enum class ProgressMode { None, Live, Log };

/// Per-step results.
struct StepRecord {
  int64_t step;
  double loss, lr, gradNorm, samplesPerSecond;
  uint64_t peakBytes; // rank 0's arena high-water mark
  bool skipped = false; // fp16: gradients overflowed, no update
  double lossScale = 0; // fp16: the scale used this step
  double seconds = 0;   // the step's wall time
  double wallTime = 0;  // unix seconds at its end
  double elapsed = 0;   // seconds since this launch's first step began
  std::vector<uint64_t> peakBytesPerRank; // every rank's high-water mark
  /// A device backend's memory in use after the step, as the driver counts
  /// it (Backend::deviceMemory; 0: no device), rank 0's and every rank's.
  uint64_t deviceBytes = 0;
  std::vector<uint64_t> deviceBytesPerRank;
};

/// An evaluation of held-out samples (smprun --eval-data) after a step.
struct EvalRecord {
  int64_t step = 0;
  double loss = 0;                  // the mean of the batches' losses
  int64_t labels = 0;               // the labels the metrics counted
  /// smpc --eval-accuracy, --eval-metrics: (name, value), as
  /// scikit-learn computes them over every batch's predictions (the
  /// accuracy: the share of the counted labels whose logit is the row's
  /// first maximum).
  std::vector<std::pair<std::string, double>> metrics;
  int64_t samples = 0, batches = 0; // evaluated
  double seconds = 0, wallTime = 0; // its duration; unix seconds at its end
};

/// What the rates are derived from.
struct RunFacts {
  int64_t totalSteps = 0, firstStep = 0; // steps done before this launch
  int64_t globalBatch = 0;               // samples per step
  int64_t tokensPerSample = 0;           // 0: no token dim
  double stepFlops = 0, peakFlops = 0;   // 0: unknown
  int numRanks = 1;
};

/// "0:01:05".
std::string formatDuration(double seconds);
/// A JSON number, or null for inf/NaN (which JSON cannot hold).
std::string jsonNumber(double v);

class Reporter : NonCopyable {
public:
  Reporter(const RunFacts &facts, ProgressMode mode, int64_t logEvery,
           bool printSteps)
      : facts_(facts), mode_(mode), logEvery_(logEvery),
        printSteps_(printSteps) {}
  ~Reporter();

  /// The JSON-lines file (appended to when resuming).
  Status openMetrics(const std::string &path, bool append);
  Status openTensorBoard(const std::string &dir);

  /// Reports a finished step.
  Status step(const StepRecord &rec);
  /// Reports an evaluation: "eval step K loss L samples N" on stdout, a
  /// log line on stderr, a metrics row (step, eval_loss, eval_samples,
  /// eval_batches, eval_time, time) and the TensorBoard scalar eval/loss.
  Status evaluation(const EvalRecord &rec);
  /// Prints a line on stderr (clearing the live line first).
  void note(const std::string &line);
  /// Ends the live line.
  void finish();

  /// The Megatron-style progress line of `rec`, its rates over `steps`
  /// steps that took `seconds`.
  std::string progressLine(const StepRecord &rec, int64_t steps,
                           double seconds, bool compact) const;
  std::string metricsRow(const StepRecord &rec) const;

private:
  void clearLive();
  /// Appends one JSON row to --metrics, flushed (none without the file).
  Status writeMetrics(const std::string &row);
  RunFacts facts_;
  ProgressMode mode_;
  int64_t logEvery_;
  bool printSteps_;
  FILE *metrics_ = nullptr;
  EventWriter events_;
  bool liveShown_ = false;
  int64_t windowSteps_ = 0; // steps since the last log line
  double windowSeconds_ = 0;
};

} // namespace smprt

#endif // SMPRT_TRAIN_PROGRESS_H
