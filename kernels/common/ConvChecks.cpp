//===- ConvChecks.cpp - Windows and checks of convolution and pooling -----===//

#include "smp/kernels/common/OpChecks.h"

#include <utility>

namespace smp::kernels::common {

int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                         int64_t padBegin, int64_t padEnd, int64_t dilation,
                         bool ceilMode) {
  int64_t effective = dilation * (kernel - 1) + 1;
  int64_t span = in + padBegin + padEnd - effective;
  if (span < 0)
    return -1;
  int64_t out = ceilMode ? (span + stride - 1) / stride + 1 : span / stride + 1;
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

namespace {

/// The window of `in`. Empty strides/dilations are 1, empty pads 0. With
/// `outShape` null the output sizes follow windowOutputSize; otherwise they
/// are outShape's spatial dims (gradients). Fails above maxDims spatial dims.
Status makeWindow(const char *op, const TensorRef &in,
                  const std::vector<int64_t> &kernel,
                  const std::vector<int64_t> &strides,
                  const std::vector<int64_t> &pads,
                  const std::vector<int64_t> &dilations, bool ceilMode,
                  const std::vector<int64_t> *outShape, size_t maxDims,
                  Window &w) {
  if (in.rank() < 3)
    return fail(op, "input must be [N, C, spatial...], got " +
                        smp::base::describe(in));
  size_t n = static_cast<size_t>(in.rank() - 2);
  if (n > maxDims)
    return fail(op, "too many spatial dims");
  if (kernel.size() != n || (!strides.empty() && strides.size() != n) ||
      (!pads.empty() && pads.size() != 2 * n) ||
      (!dilations.empty() && dilations.size() != n))
    return fail(op, "kernel/strides/dilations need " + std::to_string(n) +
                        " entries and pads " + std::to_string(2 * n) + " for " +
                        smp::base::describe(in));
  if (outShape && outShape->size() != n + 2)
    return fail(op, "expects [N, C, spatial...] tensors");
  w = Window();
  w.dims = n;
  for (size_t d = 0; d < n; ++d) {
    w.in.push_back(in.shape[d + 2]);
    w.kernel.push_back(kernel[d]);
    w.strides.push_back(strides.empty() ? 1 : strides[d]);
    w.dilations.push_back(dilations.empty() ? 1 : dilations[d]);
    w.padBegin.push_back(pads.empty() ? 0 : pads[d]);
    w.padEnd.push_back(pads.empty() ? 0 : pads[n + d]);
    if (w.kernel[d] <= 0 || w.strides[d] <= 0 || w.dilations[d] <= 0 ||
        w.padBegin[d] < 0 || w.padEnd[d] < 0)
      return fail(op, "kernel, strides and dilations must be positive and "
                      "pads non-negative (spatial dim " +
                          std::to_string(d) + ")");
    int64_t o;
    if (outShape) {
      o = (*outShape)[d + 2];
    } else {
      o = windowOutputSize(w.in[d], w.kernel[d], w.strides[d], w.padBegin[d],
                           w.padEnd[d], w.dilations[d], ceilMode);
      if (o < 0)
        return fail(op, "window does not fit spatial dim " + std::to_string(d) +
                            " of " + smp::base::describe(in));
    }
    w.out.push_back(o);
    w.inSize *= w.in[d];
    w.outSize *= o;
    w.kernelSize *= w.kernel[d];
  }
  return Status::success();
}

} // namespace

std::vector<int64_t> windowShape(const Window &w, int64_t batch,
                                 int64_t channels) {
  std::vector<int64_t> s{batch, channels};
  s.insert(s.end(), w.out.begin(), w.out.end());
  return s;
}

Status checkConv(const TensorRef &in, const TensorRef &weight,
                 const TensorRef *bias, const std::vector<int64_t> &strides,
                 const std::vector<int64_t> &pads,
                 const std::vector<int64_t> &dilations, int64_t group,
                 const TensorRef &out, size_t maxDims, Window &w) {
  const char *op = "conv";
  for (auto [t, what] :
       {std::pair<const TensorRef *, const char *>{&in, "input"},
        {&weight, "weight"},
        {&out, "output"}})
    SMP_RETURN_IF_ERROR(checkTensor(op, what, *t));
  SMP_RETURN_IF_ERROR(checkDType(op, "weight", weight, in.dtype));
  SMP_RETURN_IF_ERROR(checkDType(op, "output", out, in.dtype));
  if (weight.rank() != in.rank() || in.rank() < 3)
    return fail(op, "weight " + smp::base::describe(weight) +
                        " must have the rank of input " +
                        smp::base::describe(in) + " (at least 3)");
  int64_t channels = in.shape[1], outChannels = weight.shape[0];
  if (group <= 0 || channels != weight.shape[1] * group ||
      outChannels % group != 0)
    return fail(op, "input channels " + std::to_string(channels) +
                        " do not match weight " + smp::base::describe(weight) +
                        " with group " + std::to_string(group));
  std::vector<int64_t> kernel(weight.shape.begin() + 2, weight.shape.end());
  SMP_RETURN_IF_ERROR(makeWindow(op, in, kernel, strides, pads, dilations,
                                 false, nullptr, maxDims, w));
  SMP_RETURN_IF_ERROR(
      checkShape(op, "output", out, windowShape(w, in.shape[0], outChannels)));
  if (bias) {
    SMP_RETURN_IF_ERROR(checkFloat(op, "bias", *bias));
    SMP_RETURN_IF_ERROR(checkShape(op, "bias", *bias, {outChannels}));
  }
  return Status::success();
}

Status checkPool(const char *op, const TensorRef &in,
                 const std::vector<int64_t> &kernel,
                 const std::vector<int64_t> &strides,
                 const std::vector<int64_t> &pads,
                 const std::vector<int64_t> &dilations, bool ceilMode,
                 const TensorRef &out, size_t maxDims, Window &w) {
  SMP_RETURN_IF_ERROR(checkPair(op, in, out));
  SMP_RETURN_IF_ERROR(makeWindow(op, in, kernel, strides, pads, dilations,
                                 ceilMode, nullptr, maxDims, w));
  return checkShape(op, "output", out,
                    windowShape(w, in.shape[0], in.shape[1]));
}

Status checkConvGrad(const TensorRef &x, const TensorRef &weight,
                     const TensorRef &dy, const std::vector<int64_t> &strides,
                     const std::vector<int64_t> &pads,
                     const std::vector<int64_t> &dilations, int64_t group,
                     const TensorRef &dx, const TensorRef &dweight,
                     size_t maxDims, Window &w) {
  const char *op = "conv_grad";
  SMP_RETURN_IF_ERROR(checkFloats(op, {&x, &weight, &dy, &dx, &dweight}));
  if (weight.rank() != x.rank() || x.rank() < 3 || dy.rank() != x.rank())
    return fail(op, "expects [N, C, spatial...] tensors");
  std::vector<int64_t> kernel(weight.shape.begin() + 2, weight.shape.end());
  SMP_RETURN_IF_ERROR(makeWindow(op, x, kernel, strides, pads, dilations, false,
                                 &dy.shape, maxDims, w));
  int64_t batch = x.shape[0], c = x.shape[1], m = weight.shape[0];
  if (group <= 0 || c % group || m % group || weight.shape[1] != c / group ||
      dy.shape[1] != m || dy.shape[0] != batch)
    return fail(op, "channels do not match the weight and group");
  if (dx.numel() != x.numel() || dweight.numel() != weight.numel())
    return fail(op, "gradients must have the sizes of the input and weight");
  return Status::success();
}

Status checkPoolGrad(const TensorRef &x, const TensorRef &dy,
                     const std::vector<int64_t> &kernel,
                     const std::vector<int64_t> &strides,
                     const std::vector<int64_t> &pads,
                     const std::vector<int64_t> &dilations, const TensorRef &dx,
                     size_t maxDims, Window &w) {
  const char *op = "pool_grad";
  SMP_RETURN_IF_ERROR(checkFloats(op, {&x, &dy, &dx}));
  if (dy.rank() != x.rank())
    return fail(op, "expects [N, C, spatial...] tensors");
  SMP_RETURN_IF_ERROR(makeWindow(op, x, kernel, strides, pads, dilations, false,
                                 &dy.shape, maxDims, w));
  if (dy.shape[0] * dy.shape[1] != x.shape[0] * x.shape[1])
    return fail(op, "gradient does not match the input's planes");
  if (dx.numel() != x.numel())
    return fail(op, "gradient must have the size of the input");
  return Status::success();
}

} // namespace smp::kernels::common
