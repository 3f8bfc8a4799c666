//===- Schedule.cpp - The learning-rate schedule of a run -----------------===//

#include "smprt/train/Schedule.h"

#include "smp/base/LrSchedules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace smprt {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

/// DeepSpeed's lr_schedules.py: WarmupLR, WarmupDecayLR, WarmupCosineLR.
double deepSpeedRate(const LrSchedule &s, int64_t k) {
  bool cosine = s.kind == "warmup-cosine-lr";
  if (k == 0) // what the constructor writes into the optimizer
    return cosine ? 0.0 : s.warmupMin;
  int64_t it = k - 1; // the scheduler's last_batch_iteration
  int64_t w = std::max<int64_t>(2, s.warmupSteps);
  auto shape = [&] {
    return s.warmupType == "linear"
               ? static_cast<double>(it) / static_cast<double>(w)
               : std::log(static_cast<double>(it + 1)) /
                     std::log(static_cast<double>(w));
  };
  double t = static_cast<double>(s.decaySteps);
  if (cosine) {
    if (it < w)
      return s.lr * (s.warmupMin + (1.0 - s.warmupMin) * shape());
    // DeepSpeed 0.19 clamps the progress (earlier versions let the cosine
    // rise again after total_num_steps, and divided by zero at T == W).
    double r = static_cast<double>(it - w + 1);
    double progress =
        std::min(1.0, r / std::max(1.0, t - static_cast<double>(w)));
    double c = (1.0 + std::cos(M_PI * progress)) / 2;
    return s.lr * std::max(0.0, s.cosMinRatio + (1.0 - s.cosMinRatio) * c);
  }
  double gamma = 1.0;
  if (it < w)
    gamma = shape();
  else if (s.kind == "warmup-decay-lr")
    gamma = std::max(0.0, (t - static_cast<double>(it)) /
                              std::max(1.0, t - static_cast<double>(w)));
  return s.warmupMin + (s.lr - s.warmupMin) * gamma;
}

/// transformers' get_scheduler: "linear", "cosine" (num_cycles 0.5; with a
/// floor, "cosine_with_min_lr"'s min_lr_rate) and "constant_with_warmup",
/// at the Trainer's scheduler step i (its applied steps so far). Like
/// transformers, the cosine is not clamped after num_training_steps.
double huggingFaceRate(const LrSchedule &s, int64_t i) {
  double w = static_cast<double>(s.warmupSteps);
  double t = static_cast<double>(s.decaySteps);
  double at = static_cast<double>(i);
  if (i < s.warmupSteps)
    return s.lr * at / std::max(1.0, w);
  if (s.kind == "hf-linear")
    return s.lr * std::max(0.0, (t - at) / std::max(1.0, t - w));
  if (s.kind == "hf-cosine") {
    double progress = (at - w) / std::max(1.0, t - w);
    double f = 0.5 * (1.0 + std::cos(M_PI * progress));
    return s.lr * std::max(0.0, f * (1.0 - s.cosMinRatio) + s.cosMinRatio);
  }
  return s.lr;
}

} // namespace

LrSchedule LrSchedule::of(const smp::artifact::TrainingConfig &config,
                          int64_t steps) {
  LrSchedule s;
  s.kind = config.lr_schedule().empty() ? "constant" : config.lr_schedule();
  s.lr = config.lr();
  s.warmupSteps = config.warmup_steps();
  s.decaySteps = config.decay_steps() > 0 ? config.decay_steps() : steps;
  if (!config.warmup_type().empty())
    s.warmupType = config.warmup_type();
  s.warmupMin = config.warmup_min();
  s.cosMinRatio = config.cos_min_ratio();
  return s;
}

bool LrSchedule::decays(const std::string &kind) {
  return smp::base::scheduleDecays(kind);
}

bool LrSchedule::deepSpeed(const std::string &kind) {
  return smp::base::isDeepSpeedSchedule(kind);
}

bool LrSchedule::skipsOverflows(const std::string &kind) {
  return smp::base::scheduleSkipsOverflows(kind);
}

void LrSchedule::to(smp::artifact::LrSchedule &record) const {
  record.set_kind(kind);
  record.set_lr(lr);
  record.set_warmup_steps(warmupSteps);
  record.set_decay_steps(decaySteps);
  if (skipsOverflows(kind))
    record.set_skipped_steps(skippedSteps);
  if (deepSpeed(kind)) {
    record.set_warmup_type(warmupType);
    record.set_warmup_min(warmupMin);
  }
  if (smp::base::scheduleHasCosineFloor(kind))
    record.set_cos_min_ratio(cosMinRatio);
}

double LrSchedule::rate(int64_t k) const {
  if (deepSpeed(kind))
    return deepSpeedRate(*this, k);
  if (smp::base::isHuggingFaceSchedule(kind))
    return huggingFaceRate(*this, k);
  if (k < warmupSteps)
    return lr * static_cast<double>(k + 1) / static_cast<double>(warmupSteps);
  if (kind == "cosine") {
    double span =
        static_cast<double>(std::max<int64_t>(1, decaySteps - warmupSteps));
    double progress =
        std::min(1.0, static_cast<double>(k - warmupSteps) / span);
    return lr * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return lr;
}

Status resumedSchedule(const smp::artifact::TrainingConfig &config,
                       const smp::artifact::LrSchedule *recorded,
                       int64_t recordedTotal, const std::string &ckpt,
                       LrSchedule &out) {
  LrSchedule mine = LrSchedule::of(config, 0);
  LrSchedule theirs = mine;
  theirs.decaySteps = recordedTotal;
  if (recorded) {
    theirs.kind = recorded->kind();
    theirs.lr = recorded->lr();
    theirs.warmupSteps = recorded->warmup_steps();
    theirs.decaySteps = recorded->decay_steps();
    if (!recorded->warmup_type().empty())
      theirs.warmupType = recorded->warmup_type();
    theirs.warmupMin = recorded->warmup_min();
    theirs.cosMinRatio = recorded->cos_min_ratio();
    theirs.skippedSteps = recorded->skipped_steps();
  }
  // What to compile with to continue the checkpoint's schedule.
  std::string differ, flags;
  auto check = [&](bool same, const std::string &what, const std::string &was,
                   const std::string &is, const std::string &flag) {
    if (same)
      return;
    differ += (differ.empty() ? "" : ", ") + what + " " + was + " (this "
              "artifact: " + is + ")";
    flags += (flags.empty() ? "" : " ") + flag + " " + was;
  };
  check(theirs.kind == mine.kind, "schedule", theirs.kind, mine.kind,
        "--lr-schedule");
  check(theirs.lr == mine.lr, "peak lr", number(theirs.lr), number(mine.lr),
        "--lr");
  check(theirs.warmupSteps == mine.warmupSteps, "warmup",
        std::to_string(theirs.warmupSteps), std::to_string(mine.warmupSteps),
        "--warmup-steps");
  if (LrSchedule::deepSpeed(theirs.kind) && theirs.kind == mine.kind) {
    check(theirs.warmupType == mine.warmupType, "warmup type",
          theirs.warmupType, mine.warmupType, "--warmup-type");
    const char *minFlag = theirs.kind == "warmup-cosine-lr"
                              ? "--warmup-min-ratio"
                              : "--warmup-min-lr";
    check(theirs.warmupMin == mine.warmupMin, "warmup start",
          number(theirs.warmupMin), number(mine.warmupMin), minFlag);
  }
  if (smp::base::scheduleHasCosineFloor(theirs.kind) &&
      theirs.kind == mine.kind)
    check(theirs.cosMinRatio == mine.cosMinRatio, "cosine floor",
          number(theirs.cosMinRatio), number(mine.cosMinRatio),
          "--cos-min-ratio");
  if (theirs.kind == mine.kind && LrSchedule::decays(theirs.kind) &&
      config.decay_steps() > 0)
    check(theirs.decaySteps == config.decay_steps(), "decay over",
          std::to_string(theirs.decaySteps),
          std::to_string(config.decay_steps()), "--decay-steps");
  if (!differ.empty())
    return Status::failure(
        ckpt + ": the checkpoint's learning-rate schedule has " + differ +
        "; compile with smpc " + flags +
        " to continue it, or start a new run without --resume");
  out = theirs;
  return Status::success();
}

} // namespace smprt
