//===- CudaBackend.h - The CUDA backend (internal) --------------*- C++ -*-===//

#ifndef SMPRT_LIB_CUDA_CUDABACKEND_H
#define SMPRT_LIB_CUDA_CUDABACKEND_H

#include "smprt/exec/Backend.h"

namespace smprt {

/// The CUDA backend on `device`, or (device < 0) on the local rank's device
/// modulo the visible ones. Fails with a clear message without a usable GPU.
Status makeCudaBackend(int device, int localRank,
                       std::unique_ptr<Backend> &out);

/// The CUDA kernel table (CudaKernelTable.cpp): the shared steps over
/// kernels/cuda and the optimizer updates reading their scalars on the
/// device. Steps queue on the calling thread's current kernel context.
Status decodeCudaInstruction(const smp::artifact::Instruction &inst,
                             const std::vector<TensorRef> &buffers,
                             Communicator &comm, const RandomState &random,
                             Step &step);

} // namespace smprt

#endif // SMPRT_LIB_CUDA_CUDABACKEND_H
