//===- Schedule.h - The learning-rate schedule of a run ---------*- C++ -*-===//
//
// Linear warmup, then a constant rate or a cosine decay to 0 that ends at
// step decay_steps (and stays 0 after it); or DeepSpeed's WarmupLR,
// WarmupDecayLR and WarmupCosineLR, or the Hugging Face Trainer's linear,
// cosine and constant_with_warmup, by their formulas. Everything but
// decay_steps is compiled into the artifact (smpc --lr, --lr-schedule,
// --warmup-steps); decay_steps too with smpc --decay-steps, else it is the
// --steps of the run that starts training. Checkpoints record the schedule, so
// a run resumed with any --steps (split into several launches, or extended)
// continues the one it started with, and a resume under another schedule is
// refused.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_SCHEDULE_H
#define SMPRT_TRAIN_SCHEDULE_H

#include "checkpoint.pb.h"
#include "smprt/Base.h"
#include "smprt/exec/Artifact.h"

#include <cstdint>
#include <string>

namespace smprt {

struct LrSchedule {
  std::string kind = "constant"; // smp::base::kLrSchedules
  double lr = 0;
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0;
  // DeepSpeed's schedules: warmup shape, start (a rate, or for
  // warmup-cosine-lr a fraction of lr); warmup-cosine-lr and hf-cosine:
  // the cosine floor (a fraction).
  std::string warmupType = "log";
  double warmupMin = 0, cosMinRatio = 0;
  /// Steps skipped so far (fp16 overflows): DeepSpeed's and Hugging Face's
  /// schedules advance only on applied steps, so step k runs
  /// rateOf(k) = rate(k - skipped).
  int64_t skippedSteps = 0;

  /// The artifact's schedule for a run of `steps` steps (decay over them
  /// unless the artifact fixes decay_steps).
  static LrSchedule of(const smp::artifact::TrainingConfig &config,
                       int64_t steps);
  void to(smp::artifact::LrSchedule &record) const;

  /// The rate of 0-based step `k`: lr * (k + 1) / warmup for k < warmup,
  /// then lr (constant) or lr * (1 + cos(pi * p)) / 2 with
  /// p = min(1, (k - warmup) / max(1, decay - warmup)) (cosine; the function
  /// the PyTorch reference feeds to LambdaLR). DeepSpeed's schedules give
  /// step 0 the rate their constructor sets (warmup_min_lr; 0 for
  /// WarmupCosineLR) and step k > 0 their formula at iteration k - 1, as
  /// DeepSpeed's engine steps them after each optimizer step. Hugging
  /// Face's: lr * lambda(k) with transformers' lambdas (k / warmup in the
  /// warmup: step 0 runs at 0).
  double rate(int64_t k) const;
  /// The rate step k runs with, after skippedSteps skipped steps.
  double rateOf(int64_t k) const {
    return rate(skipsOverflows(kind) ? k - skippedSteps : k);
  }
  /// Whether `kind` is one of DeepSpeed's schedules.
  static bool deepSpeed(const std::string &kind);
  /// Whether `kind` stands still on a skipped (overflowed) step.
  static bool skipsOverflows(const std::string &kind);
  /// Whether `kind` decays over decaySteps (cosine, warmup-decay-lr,
  /// warmup-cosine-lr, hf-linear, hf-cosine).
  static bool decays(const std::string &kind);
};

/// The schedule a resumed run follows: the checkpoint's `recorded` one
/// (absent in checkpoints of older smprun: the artifact's, decaying over the
/// checkpoint's `recordedTotal` steps). Refused, with the smpc flags to
/// compile with, when the artifact's rate, kind or warmup differ from the
/// record, or when it fixes --decay-steps to another length. `ckpt` names the
/// checkpoint in errors.
Status resumedSchedule(const smp::artifact::TrainingConfig &config,
                       const smp::artifact::LrSchedule *recorded,
                       int64_t recordedTotal, const std::string &ckpt,
                       LrSchedule &out);

} // namespace smprt

#endif // SMPRT_TRAIN_SCHEDULE_H
