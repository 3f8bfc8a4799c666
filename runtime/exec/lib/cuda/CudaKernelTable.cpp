//===- CudaKernelTable.cpp - Instruction -> CUDA kernel call --------------===//
//
// The CUDA backend's kernel table: the steps shared with the CPU
// (KernelSteps.inc) over kernels/cuda, whose functions queue on the current
// context's stream, and the optimizer updates, which read the learning
// rate, the step and the skip flag where the program keeps them: in device
// memory (no copy to the host, no synchronization).
//
//===----------------------------------------------------------------------===//

#include "cuda/CudaBackend.h"

#include "smp/kernels/cuda/Kernels.h"
#include "smp/kernels/cuda/Training.h"
#include "smp/base/OpSchema.h"
#include "smprt/exec/Artifact.h"


namespace smprt {
namespace {

namespace k = smp::kernels::cuda;
using Inst = smp::artifact::Instruction;

#include "KernelSteps.inc"

bool sgdUpdateStep(Decoder &d, Step &s) {
  bool hasSkip = d.inst.inputs_size() == 6;
  k::SgdOptions o = sgdOptions(d);
  s.run = [p = d.in(0), g = d.in(1), buf = d.in(2), lr = d.in(3),
           step = d.in(4), skip = hasSkip ? d.in(5) : TensorRef(), hasSkip,
           np = d.out(0), nb = d.out(1), o] {
    return k::sgdUpdate(p, g, buf, lr, step, hasSkip ? &skip : nullptr, o, np,
                        nb);
  };
  return true;
}

bool adamUpdateStep(Decoder &d, Step &s) {
  bool hasSkip = d.inst.inputs_size() == 7;
  k::AdamOptions o = adamOptions(d);
  s.run = [p = d.in(0), g = d.in(1), m = d.in(2), v = d.in(3), lr = d.in(4),
           step = d.in(5), skip = hasSkip ? d.in(6) : TensorRef(), hasSkip,
           np = d.out(0), nm = d.out(1), nv = d.out(2), o] {
    return k::adamUpdate(p, g, m, v, lr, step, hasSkip ? &skip : nullptr, o, np,
                         nm, nv);
  };
  return true;
}


} // namespace

Status decodeCudaInstruction(const Inst &inst,
                             const std::vector<TensorRef> &buffers,
                             Communicator &comm, Step &step) {
  return decodeWith("the CUDA backend", inst, buffers, comm, step);
}

} // namespace smprt
