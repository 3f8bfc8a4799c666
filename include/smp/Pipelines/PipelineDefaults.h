//===- PipelineDefaults.h - Defaults of the training pipeline ---*- C++ -*-===//
//
// Defaults that the training pipeline (Pipelines.h) and the planner's
// models of the step it builds (smp/Planner) share, in a header of their
// own so that the planner's interface needs no pass manager.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_PIPELINES_PIPELINEDEFAULTS_H
#define SMP_PIPELINES_PIPELINEDEFAULTS_H

#include <cstdint>

namespace smp {

/// For the CUDA target (whose communication stream runs collectives beside
/// the compute: runtime/exec's lanes) smpc issues ZeRO-3's parameter
/// gathers this many gathers ahead of their first use unless
/// --gather-prefetch says otherwise (FSDP and DeepSpeed prefetch by
/// default too; the CPU backend's collectives block, so there the default
/// stays 0). GPT-2 124M bf16 at dp 2: 216 of 222 gathers beside compute
/// where none was at 0, the arena within 1% (a prefetched copy lives a few
/// instructions longer; the planner counts it: StepPeak.cpp).
constexpr int64_t kDefaultGatherPrefetch = 4;

} // namespace smp

#endif // SMP_PIPELINES_PIPELINEDEFAULTS_H
