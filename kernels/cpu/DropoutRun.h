//===- DropoutRun.h - A run of the dropout mask -----------------*- C++ -*-===//
//
// The factors of consecutive global indices (common/Dropout.h's mask:
// 1 / (1 - p) where it keeps an element, 0 where it drops it),
// drawn eight Philox counters at a time with AVX2 where the CPU has it:
// what dropout's kernel and the fused attention's dropout on its
// probabilities (a row of keys at a time) share. Private to kernels/cpu.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CPU_DROPOUTRUN_H
#define SMP_KERNELS_CPU_DROPOUTRUN_H

#include "smp/kernels/common/Dropout.h"

#include <cstdint>

namespace smp::kernels::cpu::detail {

/// z[c] = the factor of global index g0 + c, for c < n: plan.scale where
/// common::dropoutKeepsGlobal keeps it, else 0; the same with and without
/// SIMD.
void dropoutFactorRun(const common::DropoutPlan &p, uint64_t g0, int64_t n,
                      float *z);

} // namespace smp::kernels::cpu::detail

#endif // SMP_KERNELS_CPU_DROPOUTRUN_H
