//===- CpuBackend.h - The CPU backend (internal) ----------------*- C++ -*-===//

#ifndef SMPRT_EXEC_CPU_CPUBACKEND_H
#define SMPRT_EXEC_CPU_CPUBACKEND_H

#include "smprt/exec/Backend.h"

namespace smprt {

/// The CPU kernel table (CpuKernelTable.cpp): the shared steps over
/// kernels/cpu; the CPU backend's `decode`.
Status decodeInstruction(const smp::artifact::Instruction &inst,
                         const std::vector<TensorRef> &buffers,
                         Communicator &comm, const RandomState &random,
                         Step &step);

} // namespace smprt

#endif // SMPRT_EXEC_CPU_CPUBACKEND_H
