//===- LrSchedules.h - The learning-rate schedules smp runs -----*- C++ -*-===//
//
// The kinds smpc --lr-schedule accepts, the artifact records and smprun runs
// (runtime/train/lib/Schedule.cpp has their formulas): smp's own constant
// and cosine, and DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR.
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
    "constant", "cosine", "warmup-lr", "warmup-decay-lr", "warmup-cosine-lr"};

/// "constant, cosine, warmup-lr, warmup-decay-lr or warmup-cosine-lr".
inline const char *lrScheduleList() {
  return "constant, cosine, warmup-lr, warmup-decay-lr or warmup-cosine-lr";
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

/// The schedules that decay over --decay-steps.
inline bool scheduleDecays(std::string_view kind) {
  return kind == "cosine" || kind == "warmup-decay-lr" ||
         kind == "warmup-cosine-lr";
}

} // namespace smp::base

#endif // SMP_BASE_LRSCHEDULES_H
