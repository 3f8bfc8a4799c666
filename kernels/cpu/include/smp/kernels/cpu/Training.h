//===- Training.h - CPU kernels of the backward and optimizer ops -*- C++ -*-===//
//
// Gradients that are not composed from forward ops, and optimizer updates
// with PyTorch's semantics. Same conventions as Kernels.h: dense row-major
// tensors, the caller gives the output shapes and dtypes, every kernel
// returns a Status. These kernels compute in double and round once.
// Optimizer updates may run in place (new_param aliasing param, new state
// aliasing state).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CPU_TRAINING_H
#define SMP_KERNELS_CPU_TRAINING_H

#include "smp/kernels/cpu/Kernels.h"

namespace smp::kernels::cpu {

/// dx = dy * gelu'(x) (exact, or the tanh approximation's derivative).
Status geluGrad(const TensorRef &x, const TensorRef &dy, bool tanhApproximation,
                const TensorRef &dx);

/// Gradients of layerNorm(x, scale, bias, axis, eps): dx, dscale and dbias
/// (dscale and dbias have the scale's shape).
Status layerNormGrad(const TensorRef &x, const TensorRef &scale,
                     const TensorRef &dy, int64_t axis, float epsilon,
                     const TensorRef &dx, const TensorRef &dscale,
                     const TensorRef &dbias);

/// Gradients of rmsNorm(x, scale, eps): dx and dscale.
Status rmsNormGrad(const TensorRef &x, const TensorRef &scale,
                   const TensorRef &dy, float epsilon, const TensorRef &dx,
                   const TensorRef &dscale);

/// d(crossEntropy)/d(logits) scaled by the incoming gradient `dloss` (one
/// element for Sum/Mean, labels' shape for None).
Status crossEntropyGrad(const TensorRef &logits, const TensorRef &labels,
                        const TensorRef *weights, const TensorRef &dloss,
                        int64_t ignoreIndex, Reduction reduction,
                        const TensorRef &dlogits);

/// Scatter-adds gather's gradient into zeros of out's shape (the data's).
Status gatherGrad(const TensorRef &indices, const TensorRef &dy, int64_t axis,
                  const TensorRef &out);

/// Scatter-adds gather_nd's / gather_elements' gradient into zeros of out's
/// shape (the data's), in double, in index order (thread-count independent).
Status gatherNdGrad(const TensorRef &indices, const TensorRef &dy,
                    int64_t batchDims, const TensorRef &out);
Status gatherElementsGrad(const TensorRef &indices, const TensorRef &dy,
                          int64_t axis, const TensorRef &out);

/// Zeros of out's shape with dy placed at the sliced positions.
Status sliceGrad(const TensorRef &dy, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps, const TensorRef &out);

/// Gradients of conv (see Kernels.h) with respect to its input and weight
/// (the bias gradient is a plain sum of dy).
Status convGrad(const TensorRef &x, const TensorRef &weight,
                const TensorRef &dy, const std::vector<int64_t> &strides,
                const std::vector<int64_t> &pads,
                const std::vector<int64_t> &dilations, int64_t group,
                const TensorRef &dx, const TensorRef &dweight);

/// Gradient of maxPool (max = true: to each window's first maximum) or
/// avgPool (spread over the window's divisor) with respect to the input.
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
/// torch.optim.SGD for one tensor; `step` is 1 on the first step.
Status sgdUpdate(const TensorRef &param, const TensorRef &grad,
                 const TensorRef &buffer, double lr, double step,
                 const SgdOptions &options, const TensorRef &newParam,
                 const TensorRef &newBuffer);

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8, weightDecay = 0;
  bool decoupled = true; // AdamW
};
/// torch.optim.Adam / AdamW for one tensor; `step` counts from 1.
Status adamUpdate(const TensorRef &param, const TensorRef &grad,
                  const TensorRef &expAvg, const TensorRef &expAvgSq,
                  double lr, double step, const AdamOptions &options,
                  const TensorRef &newParam, const TensorRef &newExpAvg,
                  const TensorRef &newExpAvgSq);

} // namespace smp::kernels::cpu

#endif // SMP_KERNELS_CPU_TRAINING_H
