//===- Training.h - CPU optimizer updates -----------------------*- C++ -*-===//
//
// The CPU optimizer updates, with PyTorch's semantics (the gradient kernels
// are part of the shared API, smp/kernels/KernelApi.inc). lr and step are
// host scalars. These kernels compute in double and round once. Optimizer
// updates may run in place (new_param aliasing param, new state aliasing
// state).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CPU_TRAINING_H
#define SMP_KERNELS_CPU_TRAINING_H

#include "smp/kernels/cpu/Kernels.h"

namespace smp::kernels::cpu {

/// torch.optim.SGD for one tensor; `step` is 1 on the first step.
Status sgdUpdate(const TensorRef &param, const TensorRef &grad,
                 const TensorRef &buffer, double lr, double step,
                 const SgdOptions &options, const TensorRef &newParam,
                 const TensorRef &newBuffer);

/// torch.optim.Adam / AdamW for one tensor; `step` counts from 1.
Status adamUpdate(const TensorRef &param, const TensorRef &grad,
                  const TensorRef &expAvg, const TensorRef &expAvgSq,
                  double lr, double step, const AdamOptions &options,
                  const TensorRef &newParam, const TensorRef &newExpAvg,
                  const TensorRef &newExpAvgSq);

} // namespace smp::kernels::cpu

#endif // SMP_KERNELS_CPU_TRAINING_H
