//===- LrSchedules.h - The learning-rate schedules smp runs -----*- C++ -*-===//
//
// The kinds smpc --lr-schedule accepts, the artifact records and smprun runs
// (runtime/train/lib/Schedule.cpp has their formulas): smp's own constant
// and cosine, DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR, and
// the Hugging Face Trainer's linear, cosine and constant_with_warmup
// (transformers' get_scheduler).
// One list for the compiler's flag checks, the artifact's validation and the
// runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_LRSCHEDULES_H
#define SMP_BASE_LRSCHEDULES_H

#include <algorithm>
#include <iterator>
#include <string_view>

namespace smp::base {

inline constexpr const char *kLrSchedules[] = {
    "constant",         "cosine",    "warmup-lr", "warmup-decay-lr",
    "warmup-cosine-lr", "hf-linear", "hf-cosine", "hf-constant"};

/// "constant, cosine, ..., hf-cosine or hf-constant".
inline const char *lrScheduleList() {
  return "constant, cosine, warmup-lr, warmup-decay-lr, warmup-cosine-lr, "
         "hf-linear, hf-cosine or hf-constant";
}

inline bool isLrSchedule(std::string_view kind) {
  return std::find(std::begin(kLrSchedules), std::end(kLrSchedules), kind) !=
         std::end(kLrSchedules);
}

/// DeepSpeed's schedules (their formulas, first-step convention, warmup type
/// and minimum, and applied-step counting).
inline bool isDeepSpeedSchedule(std::string_view kind) {
  return kind == "warmup-lr" || kind == "warmup-decay-lr" ||
         kind == "warmup-cosine-lr";
}

/// The Hugging Face Trainer's schedules (transformers' formulas: step k of
/// the Trainer runs at lr * lambda(k), lambda(k) = k / warmup in the warmup,
/// so its first step runs at rate 0).
inline bool isHuggingFaceSchedule(std::string_view kind) {
  return kind == "hf-linear" || kind == "hf-cosine" || kind == "hf-constant";
}

/// The schedules that advance only on applied steps (DeepSpeed's engine and
/// the Hugging Face Trainer do not step their scheduler when the fp16 loss
/// scaler skips the optimizer's step); smp's own advance on every step.
inline bool scheduleSkipsOverflows(std::string_view kind) {
  return isDeepSpeedSchedule(kind) || isHuggingFaceSchedule(kind);
}

/// The schedules with a cosine floor (--cos-min-ratio).
inline bool scheduleHasCosineFloor(std::string_view kind) {
  return kind == "warmup-cosine-lr" || kind == "hf-cosine";
}

/// The schedules that decay over --decay-steps.
inline bool scheduleDecays(std::string_view kind) {
  return kind == "cosine" || kind == "warmup-decay-lr" ||
         kind == "warmup-cosine-lr" || kind == "hf-linear" ||
         kind == "hf-cosine";
}

} // namespace smp::base

#endif // SMP_BASE_LRSCHEDULES_H
