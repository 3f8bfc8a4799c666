//===- TrainingChecks.cpp - Checks of the backward and optimizer ops ------===//

#include "smp/kernels/common/OpChecks.h"

namespace smp::kernels::common {

Status checkGeluGrad(const TensorRef &x, const TensorRef &dy,
                     const TensorRef &dx) {
  const char *op = "gelu_grad";
  SMP_RETURN_IF_ERROR(checkFloats(op, {&x, &dy, &dx}));
  SMP_RETURN_IF_ERROR(checkSameShape(op, x, dy));
  if (dx.numel() != x.numel())
    return fail(op, "dx must have the size of x");
  return Status::success();
}

Status checkBiasGeluGrad(const TensorRef &x, const TensorRef &dy,
                         const TensorRef &dx, const TensorRef &dbias) {
  const char *op = "bias_gelu_grad";
  SMP_RETURN_IF_ERROR(checkFloats(op, {&x, &dy, &dx, &dbias}));
  SMP_RETURN_IF_ERROR(checkSameShape(op, x, dy));
  if (x.rank() < 1)
    return fail(op, "input must not be a scalar");
  if (dx.numel() != x.numel())
    return fail(op, "dx must have the size of x");
  if (dbias.numel() != x.shape.back())
    return fail(op, "dbias " + smp::base::describe(dbias) +
                        " must have one element per column of x " +
                        smp::base::describe(x));
  return Status::success();
}

Status checkGatherGrad(const TensorRef &indices, const TensorRef &dy,
                       int64_t axis, const TensorRef &out, GatherGradGeom &g) {
  const char *op = "gather_grad";
  SMP_RETURN_IF_ERROR(checkFloats(op, {&dy, &out}));
  SMP_RETURN_IF_ERROR(checkIndices(op, indices));
  g.axis = normAxis(axis, out.rank());
  if (g.axis < 0)
    return fail(op, "axis out of range");
  g.outer = product(out.shape, 0, g.axis);
  g.dim = out.shape[g.axis];
  g.inner = product(out.shape, g.axis + 1);
  g.count = indices.numel();
  if (dy.numel() != g.outer * g.count * g.inner)
    return fail(op, "gradient does not match the gathered shape");
  return Status::success();
}

Status checkCrossEntropyGrad(const TensorRef &logits, const TensorRef &labels,
                             const TensorRef *weights, const TensorRef &dloss,
                             bool reduced, const TensorRef &dlogits,
                             int64_t requested, int64_t &classes,
                             int64_t &stride, int64_t &rows) {
  const char *op = "cross_entropy_grad";
  SMP_RETURN_IF_ERROR(checkFloats(op, {&logits, &dloss, &dlogits}));
  SMP_RETURN_IF_ERROR(checkTensor(op, "labels", labels));
  if (smp::base::isFloat(labels.dtype))
    return fail(op,
                "labels must be integers, got " + smp::base::describe(labels));
  SMP_RETURN_IF_ERROR(checkSameShape(op, logits, dlogits));
  if (logits.rank() < 1)
    return fail(op, "logits must not be a scalar");
  stride = logits.shape.back();
  SMP_RETURN_IF_ERROR(crossEntropyClasses(op, requested, stride, classes));
  rows = labels.numel();
  if (rows * stride != logits.numel())
    return fail(op, "labels do not match the logits");
  if (weights &&
      (weights->numel() != classes || !smp::base::isFloat(weights->dtype) ||
       !checkTensor(op, "weights", *weights).ok()))
    return fail(op, "weights must hold one value per class");
  if (reduced ? dloss.numel() != 1 : dloss.numel() != rows)
    return fail(op, "incoming gradient does not match the loss");
  return Status::success();
}

namespace {

/// A vocabulary shard's logits (checked as floats by the caller), integer
/// labels of their shape without the last dim, a one-element integer
/// offset and at least one class.
Status checkShardOperands(const char *op, const TensorRef &logits,
                          const TensorRef &labels, const TensorRef &offset,
                          int64_t classes) {
  for (auto [t, what] :
       {std::pair<const TensorRef *, const char *>{&labels, "labels"},
        {&offset, "offset"}}) {
    SMP_RETURN_IF_ERROR(checkTensor(op, what, *t));
    if (smp::base::isFloat(t->dtype))
      return fail(op, std::string(what) + " must be integers, got " +
                          smp::base::describe(*t));
  }
  if (offset.numel() != 1)
    return fail(op, "offset " + smp::base::describe(offset) +
                        " must hold one element");
  if (classes < 1)
    return fail(op,
                "classes must be at least 1, not " + std::to_string(classes));
  return checkLabelsOfLogits(op, logits, labels);
}

} // namespace

Status checkCrossEntropyShard(const char *op, const TensorRef &logits,
                              const TensorRef &labels, const TensorRef &offset,
                              int64_t classes, const TensorRef &stats,
                              const TensorRef *grad, const TensorRef *dlogits,
                              int64_t &rows, int64_t &width) {
  SMP_RETURN_IF_ERROR(checkFloats(op, {&logits, &stats}));
  SMP_RETURN_IF_ERROR(checkShardOperands(op, logits, labels, offset, classes));
  std::vector<int64_t> pairs = labels.shape;
  pairs.push_back(2);
  DType statsType = logits.dtype == DType::F64 ? DType::F64 : DType::F32;
  for (const TensorRef *t : {&stats, grad}) {
    if (!t)
      continue;
    SMP_RETURN_IF_ERROR(checkTensor(op, "statistics", *t));
    SMP_RETURN_IF_ERROR(checkDType(op, "statistics", *t, statsType));
    SMP_RETURN_IF_ERROR(checkShape(op, "statistics", *t, pairs));
  }
  if (dlogits) {
    SMP_RETURN_IF_ERROR(checkTensor(op, "dlogits", *dlogits));
    SMP_RETURN_IF_ERROR(checkDType(op, "dlogits", *dlogits, logits.dtype));
    SMP_RETURN_IF_ERROR(checkSameShape(op, logits, *dlogits));
  }
  rows = labels.numel();
  width = logits.shape.back();
  return Status::success();
}

Status checkLabelRank(const char *op, const TensorRef &logits,
                      const TensorRef &labels, const TensorRef &offset,
                      const TensorRef *target, int64_t classes,
                      const TensorRef &out, int64_t &rows, int64_t &width) {
  SMP_RETURN_IF_ERROR(target ? checkFloats(op, {&logits, target})
                             : checkFloats(op, {&logits}));
  SMP_RETURN_IF_ERROR(checkShardOperands(op, logits, labels, offset, classes));
  if (target)
    SMP_RETURN_IF_ERROR(checkShape(op, "target", *target, labels.shape));
  SMP_RETURN_IF_ERROR(checkTensor(op, "out", out));
  SMP_RETURN_IF_ERROR(checkDType(op, "out", out, DType::F32));
  SMP_RETURN_IF_ERROR(checkShape(op, "out", out, labels.shape));
  rows = labels.numel();
  width = logits.shape.back();
  return Status::success();
}

Status crossEntropyClasses(const char *op, int64_t requested, int64_t stride,
                           int64_t &classes) {
  classes = requested == 0 ? stride : requested;
  if (requested < 0 || requested > stride)
    return fail(op, std::to_string(requested) +
                        " classes do not fit logits rows of " +
                        std::to_string(stride));
  return Status::success();
}

Status checkNormGrad(const char *op, const TensorRef &x,
                     const TensorRef &scale, const TensorRef &dy, int64_t axis,
                     const TensorRef &dx, const TensorRef &dscale,
                     const TensorRef *dbias, std::vector<int64_t> &norm) {
  SMP_RETURN_IF_ERROR(
      dbias ? checkFloats(op, {&x, &scale, &dy, &dx, &dscale, dbias})
            : checkFloats(op, {&x, &scale, &dy, &dx, &dscale}));
  SMP_RETURN_IF_ERROR(checkSameShape(op, x, dy));
  if (!dbias) { // rms_norm_grad: the last dim
    if (x.rank() < 1)
      return fail(op, "input must not be a scalar");
    norm = {x.shape.back()};
  } else {
    int64_t a = normAxis(axis, x.rank());
    if (a < 0)
      return fail(op, "axis out of range");
    norm.assign(x.shape.begin() + a, x.shape.end());
  }
  std::vector<int64_t> strides;
  if (!broadcastStrides(scale.shape, norm, strides))
    return fail(op, "scale " + smp::base::describe(scale) +
                        " does not broadcast onto " + shapeStr(norm));
  if (dx.numel() != x.numel() || dscale.numel() != scale.numel() ||
      (dbias && dbias->numel() != scale.numel()))
    return fail(op, "gradients must have the sizes of the input and scale");
  return Status::success();
}

Status checkResidual(const char *op, const TensorRef &x,
                     const TensorRef *residual) {
  if (!residual)
    return Status::success();
  SMP_RETURN_IF_ERROR(checkFloats(op, {residual}));
  if (residual->shape != x.shape)
    return fail(op, "residual " + smp::base::describe(*residual) +
                        " must have the input's shape " +
                        smp::base::describe(x));
  return Status::success();
}

Status checkSgd(const TensorRef &param, const TensorRef &grad,
                const TensorRef &buffer, const TensorRef &newParam,
                const TensorRef &newBuffer) {
  const char *op = "sgd_update";
  SMP_RETURN_IF_ERROR(
      checkFloats(op, {&param, &grad, &buffer, &newParam, &newBuffer}));
  int64_t n = param.numel();
  if (grad.numel() != n || buffer.numel() != n)
    return fail(op, "parameter, gradient and buffer differ in size");
  return Status::success();
}

Status checkAdam(const char *op, const TensorRef &param, const TensorRef &grad,
                 const TensorRef &expAvg, const TensorRef &expAvgSq,
                 const TensorRef &newParam, const TensorRef &newExpAvg,
                 const TensorRef &newExpAvgSq) {
  SMP_RETURN_IF_ERROR(checkFloats(op, {&param, &grad, &expAvg, &expAvgSq,
                                       &newParam, &newExpAvg, &newExpAvgSq}));
  int64_t n = param.numel();
  if (grad.numel() != n || expAvg.numel() != n || expAvgSq.numel() != n)
    return fail(op, "parameter, gradient and states differ in size");
  return Status::success();
}

} // namespace smp::kernels::common
