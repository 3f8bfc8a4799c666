//===- Training.h - CUDA optimizer updates ----------------------*- C++ -*-===//
//
// The CUDA optimizer updates (the gradient kernels are part of the shared
// API, smp/kernels/KernelApi.inc; device tensors, asynchronous on the current
// context's stream). They accept any float dtype per operand and compute in
// f64 like the CPU; row statistics of the norm gradients accumulate in f32
// (f64 for f64 inputs).
//
// The optimizers differ from the CPU API in one way: lr and step are device
// scalars (one element of f32, f64, f16, bf16 or any integer dtype; the CPU
// runtime reads them on the host with scalarAt), and the optional `skip`
// flag (one element, read as the CPU runtime's skipUpdate does: its first
// byte, non-zero means skip) is read on the device too. When skip is set, the
// outputs become copies of the inputs (newParam = param and the new states =
// the old states) and nothing else is written.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_TRAINING_H
#define SMP_KERNELS_CUDA_TRAINING_H

#include "smp/kernels/cuda/Kernels.h"

namespace smp::kernels::cuda {

/// torch.optim.SGD; `step` (device scalar) is 1 on the first step. Without
/// momentum newBuffer is not written (unless skip copies buffer into it).
Status sgdUpdate(const TensorRef &param, const TensorRef &grad,
                 const TensorRef &buffer, const TensorRef &lr,
                 const TensorRef &step, const TensorRef *skip,
                 const SgdOptions &options, const TensorRef &newParam,
                 const TensorRef &newBuffer);

/// torch.optim.Adam / AdamW; `step` (device scalar) counts from 1.
Status adamUpdate(const TensorRef &param, const TensorRef &grad,
                  const TensorRef &expAvg, const TensorRef &expAvgSq,
                  const TensorRef &lr, const TensorRef &step,
                  const TensorRef *skip, const AdamOptions &options,
                  const TensorRef &newParam, const TensorRef &newExpAvg,
                  const TensorRef &newExpAvgSq);

/// One tensor of a multi-tensor Adam update (the arguments of adamUpdate).
struct AdamTensors {
  TensorRef param, grad, expAvg, expAvgSq, newParam, newExpAvg, newExpAvgSq;
};
/// adamUpdate of every entry with one kernel launch (the tensors are
/// described by a device array of pointers, dtypes and sizes); same lr, step,
/// skip and options for all. The same results as one adamUpdate per entry.
Status adamUpdateMulti(const std::vector<AdamTensors> &tensors,
                       const TensorRef &lr, const TensorRef &step,
                       const TensorRef *skip, const AdamOptions &options);

/// One tensor of a multi-tensor SGD update (the arguments of sgdUpdate).
struct SgdTensors {
  TensorRef param, grad, buffer, newParam, newBuffer;
};
/// sgdUpdate of every entry with one kernel launch; same lr, step, skip and
/// options for all. The same results as one sgdUpdate per entry.
Status sgdUpdateMulti(const std::vector<SgdTensors> &tensors,
                      const TensorRef &lr, const TensorRef &step,
                      const TensorRef *skip, const SgdOptions &options);

} // namespace smp::kernels::cuda

#endif // SMP_KERNELS_CUDA_TRAINING_H
