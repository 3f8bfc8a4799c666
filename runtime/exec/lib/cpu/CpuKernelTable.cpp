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
  bool hasSkip = d.inst.inputs_size() == 6;
  k::SgdOptions o = sgdOptions(d);
  s.run = [p = d.in(0), g = d.in(1), buf = d.in(2), lr = d.in(3),
           step = d.in(4), skip = hasSkip ? d.in(5) : TensorRef(), hasSkip,
           np = d.out(0), nb = d.out(1), o] {
    if (skipUpdate({p, buf}, 0, hasSkip ? &skip : nullptr, {np, nb}))
      return Status::success();
    return k::sgdUpdate(p, g, buf, scalarAt(lr), scalarAt(step), o, np, nb);
  };
  return true;
}

bool adamUpdateStep(Decoder &d, Step &s) {
  bool hasSkip = d.inst.inputs_size() == 7;
  k::AdamOptions o = adamOptions(d);
  s.run = [p = d.in(0), g = d.in(1), m = d.in(2), v = d.in(3), lr = d.in(4),
           step = d.in(5), skip = hasSkip ? d.in(6) : TensorRef(), hasSkip,
           np = d.out(0), nm = d.out(1), nv = d.out(2), o] {
    if (skipUpdate({p, m, v}, 0, hasSkip ? &skip : nullptr, {np, nm, nv}))
      return Status::success();
    return k::adamUpdate(p, g, m, v, scalarAt(lr), scalarAt(step), o, np, nm,
                         nv);
  };
  return true;
}

} // namespace

Status decodeInstruction(const Inst &inst,
                         const std::vector<TensorRef> &buffers,
                         Communicator &comm, Step &step) {
  return decodeWith("this smprun", inst, buffers, comm, step);
}

} // namespace smprt
