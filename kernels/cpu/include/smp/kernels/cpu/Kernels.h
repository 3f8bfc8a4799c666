//===- Kernels.h - CPU kernels of the smp ops --------------------*- C++ -*-===//
//
// The CPU backend of the kernel API (smp/kernels/Kernels.h and
// KernelApi.inc, declared once for every backend), in smp::kernels::cpu,
// plus the thread count.
//
// Sums (reductions, norm statistics, softmax denominators, losses)
// accumulate in double. NaNs propagate through max/min/relu/pooling. In f32,
// exp, tanh, sigmoid, silu, the tanh GELU and softmax use vectorised
// approximations on x86-64 CPUs with AVX2 and FMA (within a few ulp, see
// VecMath.h); elsewhere the C library. matmul: f32 runs on cblas_sgemm, f64
// on dgemm, f16/bf16 through f32, integers with a plain loop; conv: im2col +
// GEMM.
//
// Plain C++17 + OpenMP + OpenBLAS; no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CPU_KERNELS_H
#define SMP_KERNELS_CPU_KERNELS_H

#include "smp/kernels/Kernels.h"

namespace smp::kernels::cpu {

/// Sets the number of OpenMP threads the kernels use (n >= 1). GEMMs are
/// split over these threads too, each part a single-threaded OpenBLAS call
/// (OpenBLAS's own thread pool is set to one thread).
void setNumThreads(int n);
/// The OpenMP thread count the kernels use.
int numThreads();
/// Which code the vectorised kernels run: "avx2+fma", or "plain C++" (a
/// CPU without AVX2/FMA, or SMP_CPU_SIMD=off in the environment).
const char *simdPath();

#include "smp/kernels/KernelApi.inc"

} // namespace smp::kernels::cpu

#endif // SMP_KERNELS_CPU_KERNELS_H
