//===- Training.h - CUDA kernels of the backward and optimizer ops -*- C++ -*-===//
//
// The CUDA twin of smp/kernels/cpu/Training.h (same conventions as
// Kernels.h: device tensors, asynchronous on the current context's stream).
// Gradients and optimizer updates accept any float dtype per operand;
// elementwise ones compute in f64 like the CPU, row statistics of the norm
// gradients accumulate in f32 (f64 for f64 inputs).
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

Status geluGrad(const TensorRef &x, const TensorRef &dy, bool tanhApproximation,
                const TensorRef &dx);

Status layerNormGrad(const TensorRef &x, const TensorRef &scale,
                     const TensorRef &dy, int64_t axis, float epsilon,
                     const TensorRef &dx, const TensorRef &dscale,
                     const TensorRef &dbias);

Status rmsNormGrad(const TensorRef &x, const TensorRef &scale,
                   const TensorRef &dy, float epsilon, const TensorRef &dx,
                   const TensorRef &dscale);

/// A bad label is a device error ("cross_entropy_grad: label ...").
Status crossEntropyGrad(const TensorRef &logits, const TensorRef &labels,
                        const TensorRef *weights, const TensorRef &dloss,
                        int64_t ignoreIndex, Reduction reduction,
                        const TensorRef &dlogits);

/// Scatter-add with atomics: f32 and f64 add straight into out, f16 and bf16
/// into an f32 scratch converted at the end. The order of the additions is
/// not deterministic (results may differ in the last bits between runs).
/// An index out of range is a device error ("gather_grad: index ...").
Status gatherGrad(const TensorRef &indices, const TensorRef &dy, int64_t axis,
                  const TensorRef &out);

/// Scatter-adds with atomics as gatherGrad (not deterministic in the last
/// bits); an index out of range is a device error.
Status gatherNdGrad(const TensorRef &indices, const TensorRef &dy,
                    int64_t batchDims, const TensorRef &out);
Status gatherElementsGrad(const TensorRef &indices, const TensorRef &dy,
                          int64_t axis, const TensorRef &out);

Status sliceGrad(const TensorRef &dy, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, const TensorRef &out);

Status convGrad(const TensorRef &x, const TensorRef &weight,
                const TensorRef &dy, const std::vector<int64_t> &strides,
                const std::vector<int64_t> &pads,
                const std::vector<int64_t> &dilations, int64_t group,
                const TensorRef &dx, const TensorRef &dweight);

Status poolGrad(bool max, const TensorRef &x, const TensorRef &dy,
                const std::vector<int64_t> &kernel,
                const std::vector<int64_t> &strides,
                const std::vector<int64_t> &pads,
                const std::vector<int64_t> &dilations, bool countIncludePad,
                const TensorRef &dx);

struct SgdOptions {
  double momentum = 0, dampening = 0, weightDecay = 0;
  bool nesterov = false;
};
/// torch.optim.SGD; `step` (device scalar) is 1 on the first step. Without
/// momentum newBuffer is not written (unless skip copies buffer into it).
Status sgdUpdate(const TensorRef &param, const TensorRef &grad,
                 const TensorRef &buffer, const TensorRef &lr,
                 const TensorRef &step, const TensorRef *skip,
                 const SgdOptions &options, const TensorRef &newParam,
                 const TensorRef &newBuffer);

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weightDecay = 0;
  bool decoupled = true; // AdamW
};
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

} // namespace smp::kernels::cuda

#endif // SMP_KERNELS_CUDA_TRAINING_H
