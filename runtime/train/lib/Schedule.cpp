//===- Schedule.cpp - The learning-rate schedule of a run -----------------===//

#include "smprt/train/Schedule.h"

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

} // namespace

LrSchedule LrSchedule::of(const smp::artifact::TrainingConfig &config,
                          int64_t steps) {
  LrSchedule s;
  s.kind = config.lr_schedule().empty() ? "constant" : config.lr_schedule();
  s.lr = config.lr();
  s.warmupSteps = config.warmup_steps();
  s.decaySteps = config.decay_steps() > 0 ? config.decay_steps() : steps;
  return s;
}

void LrSchedule::to(smp::artifact::LrSchedule &record) const {
  record.set_kind(kind);
  record.set_lr(lr);
  record.set_warmup_steps(warmupSteps);
  record.set_decay_steps(decaySteps);
}

double LrSchedule::rate(int64_t k) const {
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
  bool cosine = theirs.kind == "cosine" && mine.kind == "cosine";
  if (cosine && config.decay_steps() > 0)
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
