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

/// smp-multi-tensor sums the micro-batches' 16-bit gradients into their f32
/// sums with add_multis of up to this many bytes of sums (each 16-bit
/// gradient stays live until its group's op: GPT-2 124M's are 250 MB in
/// bf16); the planner's memory model groups them alike (StepPeak.cpp).
constexpr int64_t kAccumulationGroupBytes = int64_t(64) << 20;

} // namespace smp

#endif // SMP_PIPELINES_PIPELINEDEFAULTS_H
