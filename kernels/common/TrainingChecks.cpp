//===- TrainingChecks.cpp - Checks of the backward and optimizer ops ------===//

#include "smp/kernels/common/OpChecks.h"

namespace smp::kernels::common {

Status checkGeluGrad(const TensorRef &x, const TensorRef &dy,
                     const TensorRef &dx) {
  const char *op = "gelu_grad";
  if (Status s = checkFloats(op, {&x, &dy, &dx}); !s.ok())
    return s;
  return checkSameShape(op, x, dy);
}

Status checkSgd(const TensorRef &param, const TensorRef &grad,
                const TensorRef &buffer, const TensorRef &newParam,
                const TensorRef &newBuffer) {
  const char *op = "sgd_update";
  if (Status s =
          checkFloats(op, {&param, &grad, &buffer, &newParam, &newBuffer});
      !s.ok())
    return s;
  int64_t n = param.numel();
  if (grad.numel() != n || buffer.numel() != n)
    return fail(op, "parameter, gradient and buffer differ in size");
  return Status::success();
}

Status checkAdam(const char *op, const TensorRef &param, const TensorRef &grad,
                 const TensorRef &expAvg, const TensorRef &expAvgSq,
                 const TensorRef &newParam, const TensorRef &newExpAvg,
                 const TensorRef &newExpAvgSq) {
  if (Status s = checkFloats(op, {&param, &grad, &expAvg, &expAvgSq, &newParam,
                                  &newExpAvg, &newExpAvgSq});
      !s.ok())
    return s;
  int64_t n = param.numel();
  if (grad.numel() != n || expAvg.numel() != n || expAvgSq.numel() != n)
    return fail(op, "parameter, gradient and states differ in size");
  return Status::success();
}

} // namespace smp::kernels::common
