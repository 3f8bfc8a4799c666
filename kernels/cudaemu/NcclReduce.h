//===- NcclReduce.h - The emulated NCCL's reduction arithmetic --*- C++ -*-===//
//
// Private to kernels/cudaemu (Nccl.cpp's collectives).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_CUDAEMU_NCCLREDUCE_H
#define SMP_CUDAEMU_NCCLREDUCE_H

#include <nccl.h>

#include <cstddef>

namespace smp::cudaemu {

/// a = a (op) b elementwise over n elements of type t (avg sums here).
void combine(void *a, const void *b, size_t n, ncclDataType_t t, int op);
/// Divides n elements by `ranks` (ncclAvg).
void average(void *a, size_t n, ncclDataType_t t, int ranks);

} // namespace smp::cudaemu

#endif // SMP_CUDAEMU_NCCLREDUCE_H
