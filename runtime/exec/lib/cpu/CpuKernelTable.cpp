//===- CpuKernelTable.cpp - Instruction -> CPU kernel call ----------------===//
//
// The CPU backend's kernel table: the shared steps (KernelSteps.inc) over
// kernels/cpu, and the optimizer updates reading their scalars from host
// memory.
//
//===----------------------------------------------------------------------===//

#include "cpu/CpuBackend.h"

#include "smp/kernels/cpu/Kernels.h"
#include "smp/kernels/cpu/Training.h"
#include "smp/base/OpSchema.h"
#include "smprt/exec/Artifact.h"

#include <cstring>

namespace smprt {
namespace {

namespace k = smp::kernels::cpu;
using Inst = smp::artifact::Instruction;

#include "KernelSteps.inc"

/// Reads a rank-0 f32/f64 hyperparameter (lr, step) at run time.
double scalarAt(const TensorRef &t) {
  return t.dtype == DType::F64   ? *t.as<double>()
         : t.dtype == DType::F32 ? static_cast<double>(*t.as<float>())
         : t.dtype == DType::BF16
             ? static_cast<double>(bf16ToFloat(*t.as<uint16_t>()))
             : static_cast<double>(halfToFloat(*t.as<uint16_t>()));
}

/// True when an optimizer update's optional `skip` flag is set: then the
/// outputs keep the inputs' values (copied unless written in place).
bool skipUpdate(const std::vector<TensorRef> &in, size_t first,
                const TensorRef *skip, const std::vector<TensorRef> &out) {
  if (!skip || *skip->as<uint8_t>() == 0)
    return false;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].data != in[first + i].data)
      std::memcpy(out[i].data, in[first + i].data, out[i].bytes());
  return true;
}

bool sgdUpdateStep(Decoder &d, Step &s) {
  s.run = [x = sgdOperands(d)] {
    if (skipUpdate({x.param, x.buffer}, 0, x.hasSkip ? &x.skip : nullptr,
                   {x.newParam, x.newBuffer}))
      return Status::success();
    return k::sgdUpdate(x.param, x.grad, x.buffer, scalarAt(x.lr),
                        scalarAt(x.step), x.options, x.newParam, x.newBuffer);
  };
  return true;
}

bool sgdUpdateMultiStep(Decoder &d, Step &s) {
  s.run = [x = sgdMultiOperands(d)] {
    if (x.hasSkip && *x.skip.as<uint8_t>() != 0) {
      for (const SgdOperands &t : x.tensors)
        skipUpdate({t.param, t.buffer}, 0, &x.skip, {t.newParam, t.newBuffer});
      return Status::success();
    }
    double lr = scalarAt(x.lr), step = scalarAt(x.step);
    for (const SgdOperands &t : x.tensors)
      SMP_RETURN_IF_ERROR(k::sgdUpdate(t.param, t.grad, t.buffer, lr, step,
                                       x.options, t.newParam, t.newBuffer));
    return Status::success();
  };
  return true;
}

bool adamUpdateStep(Decoder &d, Step &s) {
  s.run = [x = adamOperands(d)] {
    if (skipUpdate({x.param, x.m, x.v}, 0, x.hasSkip ? &x.skip : nullptr,
                   {x.newParam, x.newM, x.newV}))
      return Status::success();
    return k::adamUpdate(x.param, x.grad, x.m, x.v, scalarAt(x.lr),
                         scalarAt(x.step), x.options, x.newParam, x.newM,
                         x.newV);
  };
  return true;
}

bool adamUpdateMultiStep(Decoder &d, Step &s) {
  s.run = [x = adamMultiOperands(d)] {
    if (x.hasSkip && *x.skip.as<uint8_t>() != 0) {
      for (const AdamOperands &t : x.tensors)
        skipUpdate({t.param, t.m, t.v}, 0, &x.skip,
                   {t.newParam, t.newM, t.newV});
      return Status::success();
    }
    double lr = scalarAt(x.lr), step = scalarAt(x.step);
    for (const AdamOperands &t : x.tensors)
      SMP_RETURN_IF_ERROR(k::adamUpdate(t.param, t.grad, t.m, t.v, lr, step,
                                        x.options, t.newParam, t.newM, t.newV));
    return Status::success();
  };
  return true;
}

} // namespace

Status decodeInstruction(const Inst &inst,
                         const std::vector<TensorRef> &buffers,
                         Communicator &comm, const RandomState &random,
                         Step &step) {
  return decodeWith("this smprun", inst, buffers, comm, random, step);
}

} // namespace smprt
