//===- Wgmma.h - Hopper's warpgroup products, checked on their own -*- C++
//-*-===//
//
// kernels/cuda/Wgmma.cuh wraps wgmma.mma_async (sm_90a), which the
// attention kernels run as an option. wgmmaProduct64 runs it alone on a 64 x 64
// x 64 product, in each form an attention kernel needs (Q K^T from shared
// memory, P V with P in registers and V MN-major), so that a GPU says whether
// the wrapper's descriptors, register fragments and accumulator layout are
// right before an attention kernel is built on them
// (smp-cuda-wgmma-tests; its own process, since a wrong descriptor can
// fault and end every later test of a process).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_WGMMA_H
#define SMP_KERNELS_CUDA_WGMMA_H

#include "smp/base/Status.h"

namespace smp::kernels::cuda {

/// How the probe lays its operands out in shared memory (unswizzled, core
/// matrices of 8 x 8 values): along K first (core matrices adjacent along
/// K: LBO 128 bytes, SBO 1,024) or along M/N first (SBO 128, LBO 1,024).
/// Both give the same product; a descriptor whose LBO and SBO were swapped
/// gives a wrong one for either.
enum class WgmmaLayout { KFirst, RowsFirst };

/// Where the probe's operands come from (Wgmma.cuh's forms): A from shared
/// memory or from the warps' registers (as FlashAttention's probabilities
/// would be), B K-major or MN-major (`bTransposed`: a row-major [K x N]
/// tile such as attention's V, copied 16 bytes along N at a time).
struct WgmmaForm {
  bool aInRegisters = false;
  bool bTransposed = false;
  /// A diagnostic for a failing MN-major B: its bytes laid out as always,
  /// its descriptor's LBO and SBO exchanged (Wgmma.cuh's wgmmaMnMajor reads
  /// LBO along K; if the product is right only this way, the hardware
  /// reads it along N).
  bool swapMnStrides = false;
};

/// d[64 x 64] (f32, row-major) = A B on one warpgroup (four
/// wgmma.m64n64k16 over K = 64): a row-major [64 x 64] A, b row-major
/// [N x K] (B's transpose) or, with form.bTransposed, [K x N], f16 or bf16
/// device arrays (`bf16` says which), on the default stream, synchronized.
/// Fails without compute capability 9.0 (no sm_90a code for the device).
base::Status wgmmaProduct64(const void *a, const void *b, float *d, bool bf16,
                            WgmmaLayout layout, WgmmaForm form = {});

} // namespace smp::kernels::cuda

#endif // SMP_KERNELS_CUDA_WGMMA_H
