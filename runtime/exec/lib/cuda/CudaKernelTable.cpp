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
  s.run = [x = sgdOperands(d)] {
    return k::sgdUpdate(x.param, x.grad, x.buffer, x.lr, x.step,
                        x.hasSkip ? &x.skip : nullptr, x.options, x.newParam,
                        x.newBuffer);
  };
  return true;
}

bool sgdUpdateMultiStep(Decoder &d, Step &s) {
  SgdMultiOperands x = sgdMultiOperands(d);
  std::vector<k::SgdTensors> tensors;
  for (const SgdOperands &t : x.tensors)
    tensors.push_back(
        k::SgdTensors{t.param, t.grad, t.buffer, t.newParam, t.newBuffer});
  s.run = [tensors = std::move(tensors), lr = x.lr, step = x.step,
           skip = x.skip, hasSkip = x.hasSkip, options = x.options] {
    return k::sgdUpdateMulti(tensors, lr, step, hasSkip ? &skip : nullptr,
                             options);
  };
  return true;
}

bool adamUpdateStep(Decoder &d, Step &s) {
  s.run = [x = adamOperands(d)] {
    return k::adamUpdate(x.param, x.grad, x.m, x.v, x.lr, x.step,
                         x.hasSkip ? &x.skip : nullptr, x.options, x.newParam,
                         x.newM, x.newV);
  };
  return true;
}

bool adamUpdateMultiStep(Decoder &d, Step &s) {
  AdamMultiOperands x = adamMultiOperands(d);
  std::vector<k::AdamTensors> tensors;
  for (const AdamOperands &t : x.tensors)
    tensors.push_back(
        k::AdamTensors{t.param, t.grad, t.m, t.v, t.newParam, t.newM, t.newV});
  s.run = [tensors = std::move(tensors), lr = x.lr, step = x.step,
           skip = x.skip, hasSkip = x.hasSkip, options = x.options] {
    return k::adamUpdateMulti(tensors, lr, step, hasSkip ? &skip : nullptr,
                              options);
  };
  return true;
}

} // namespace

Status decodeCudaInstruction(const Inst &inst,
                             const std::vector<TensorRef> &buffers,
                             Communicator &comm, const RandomState &random,
                             Step &step) {
  return decodeWith("the CUDA backend", inst, buffers, comm, random, step);
}

} // namespace smprt
