//===- Wgmma.cuh - Hopper's warpgroup tensor-core products -------*- C++
//-*-===//
//
// wgmma.mma_async (sm_90a): one warpgroup (4 consecutive warps, the first
// at a warp index divisible by 4) multiplies a 64 x 16 A (from shared
// memory, or from the warps' registers) by a 16 x N B (from shared memory),
// read by the tensor cores through 64-bit matrix descriptors, into 64 x N
// f32 accumulators held in the warpgroup's registers (PTX ISA, "Asynchronous
// Warpgroup Level Matrix Multiply- Accumulate"). It is what cuBLASLt's and
// cuDNN's Hopper kernels run on, and what the attention kernels
// (AttentionMma.cu, on mma.sync) do not use yet; this header is its first
// brick, checked on its own by WgmmaProbe.cu before anything is built on it.
//
// Operands: "K-major" (each row of A, and each column of B, contiguous
// along K), without swizzling: the tile is made of core matrices of 8 rows
// x 16 bytes (8 x 8 16-bit values, 128 contiguous bytes, row r at byte 16 r);
// a descriptor gives the tile's start, the leading byte offset (LBO: from a
// core matrix to the next along K) and the stride byte offset (SBO: to the
// next along M or N). Element (r, k) of such a tile lies at
//   start + (r / 8) SBO + (k / 8) LBO + (r % 8) 16 + (k % 8) 2.
//
// Accumulators (m64nNk16, f32): warp w of the warpgroup holds rows
// [16 w, 16 w + 16); with g = lane / 4 and t = lane % 4, d[4 j + i] is
// row 16 w + g + 8 (i / 2), column 8 j + 2 t + i % 2 (mma.sync's C
// fragment, once per 8 columns).
//
// Ordering: shared memory written by ordinary stores must be fenced for
// the tensor cores' (async) proxy by every writing thread before the
// barrier that precedes the products (fenceProxyAsync); wgmmaFence before
// the first product that reads accumulators the threads wrote; the
// products of a commit group are done, their accumulators written and
// their shared memory read, once wgmmaWait<n> leaves at most n groups in
// flight; then wgmmaFenceOperands on the accumulators and
// wgmmaKeepOperands on register A fragments keep the compiler from
// reading the first before the wait or reusing the second's registers.
//
// Without sm_90a (a plain sm_90 build, or another GPU) the products trap;
// callers check the device first (WgmmaProbe.cu: compute capability 9.0).
// In the CUDA emulator (SMP_CUDAEMU) they are the emulator's
// (kernels/cudaemu/Wgmma.cpp): issued products are computed when they are
// waited for, reading shared memory then, so a kernel that reads the
// accumulators before waiting sees their old values, and one that
// overwrites an operand before waiting feeds the products the new bytes.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_WGMMA_CUH
#define SMP_KERNELS_CUDA_WGMMA_CUH

#include "Common.cuh"

namespace smp::kernels::cuda::detail {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SMP_WGMMA_DEVICE 1
#endif

/// The descriptor of an unswizzled shared-memory operand at `tile`
/// (16-byte aligned): lbo and sbo in bytes (multiples of 16).
__device__ inline uint64_t wgmmaDescriptor(const void *tile, uint32_t lbo,
                                           uint32_t sbo) {
#ifdef SMP_CUDAEMU
  uint64_t at = ::smp::cudaemu::sharedAddress(tile);
#else
  uint64_t at = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
#endif
  return ((at & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo & 0x3FFFF) >> 4) << 32);
}

/// A K-major operand at `start` (A's rows or B's columns along `rows`):
/// element (r, k) at start + (r / 8) rowGroups + (k / 8) kGroups + (r % 8)
/// 16 + (k % 8) 2 (LBO: the K direction, SBO: the rows').
__device__ inline uint64_t wgmmaKMajor(const void *start, uint32_t kGroups,
                                       uint32_t rowGroups) {
  return wgmmaDescriptor(start, kGroups, rowGroups);
}

/// An MN-major B at `start`: element (k, n) at start + (n / 8) nGroups +
/// (k / 8) kGroups + (k % 8) 16 + (n % 8) 2. LBO the K direction and SBO
/// the N direction, as CUTLASS's unswizzled (INTERLEAVE) MN-major layout
/// reads them; the emulator reads them so, and the probe's MN-major cases
/// (both core-matrix orders) check it on a GPU. Every MN-major operand
/// takes its descriptor here.
__device__ inline uint64_t wgmmaMnMajor(const void *start, uint32_t kGroups,
                                        uint32_t nGroups) {
  return wgmmaDescriptor(start, kGroups, nGroups);
}

/// desc with its start address `bytes` further on (a multiple of 16; the
/// address stays under 256 KiB, as shared memory's do): one 32-bit add,
/// where a descriptor made anew takes half a dozen instructions.
__device__ inline uint64_t wgmmaAdvance(uint64_t desc, uint32_t bytes) {
  uint32_t lo = static_cast<uint32_t>(desc) + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}

/// Orders this thread's ordinary shared-memory stores before the tensor
/// cores' reads (fence.proxy.async.shared::cta); a barrier follows.
__device__ inline void fenceProxyAsync() {
#ifdef SMP_WGMMA_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

/// wgmma.fence: the accumulators' registers as the threads left them.
__device__ inline void wgmmaFence() {
#ifdef SMP_CUDAEMU
  ::smp::cudaemu::wgmmaFence();
#elif defined(SMP_WGMMA_DEVICE)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

/// Closes the group of the products issued since the last commit.
__device__ inline void wgmmaCommit() {
#ifdef SMP_CUDAEMU
  ::smp::cudaemu::wgmmaCommit();
#elif defined(SMP_WGMMA_DEVICE)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

/// Waits until at most kGroups commit groups are in flight.
template <int kGroups> __device__ inline void wgmmaWait() {
#ifdef SMP_CUDAEMU
  ::smp::cudaemu::wgmmaWait(kGroups);
#elif defined(SMP_WGMMA_DEVICE)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kGroups) : "memory");
#endif
}

/// After a wgmmaWait, for each accumulator array its products wrote: the
/// registers hold what the products wrote from here on (the compiler saw
/// them written at the wgmma's asm statement and could otherwise move a
/// read of them above the wait).
template <int N> __device__ inline void wgmmaFenceOperands(float (&d)[N]) {
#ifdef SMP_WGMMA_DEVICE
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(d[i])::"memory");
#else
  (void)d;
#endif
}

/// After a wgmmaWait, for A fragments its products read from registers:
/// they stay live (unreused) until here.
template <int M>
__device__ inline void wgmmaKeepOperands(const uint32_t (&a)[M][4]) {
#ifdef SMP_WGMMA_DEVICE
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      asm volatile("" ::"r"(a[m][i]) : "memory");
#else
  (void)a;
#endif
}

#define SMP_WGMMA_D8(i)                                                        \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]),  \
      "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])

/// The 32 accumulators and the scale-d predicate of an m64n64k16 product
/// (operands %0 to %31; `p` set from the operand named by SCALE).
#define SMP_WGMMA_HEAD(TYPE, SCALE)                                            \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE ", 0;\n"                           \
  "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE                  \
  " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "   \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "     \
  "%30, %31}, "
#define SMP_WGMMA_D                                                            \
  SMP_WGMMA_D8(0), SMP_WGMMA_D8(8), SMP_WGMMA_D8(16), SMP_WGMMA_D8(24)

/// d (+)= A B for the warpgroup, m64n64k16: A 64 x 16 and B 16 x 64 of S
/// (f16 or bf16) in shared memory (descriptors a and b; A K-major, B
/// K-major or, with kTransB, MN-major: element (k, n) at start + (n / 8)
/// SBO + (k / 8) LBO + (k % 8) 16 + (n % 8) 2, each 16 bytes 8 values
/// along N), d the thread's 32 accumulators; accumulate false: d = A B.
/// Asynchronous: d is written once a wgmmaWait covers the product's commit
/// group.
template <class S, bool kTransB = false>
__device__ inline void wgmmaM64N64K16(float (&d)[32], uint64_t a, uint64_t b,
                                      bool accumulate) {
  static_assert(kHalf<S>, "wgmma takes f16 or bf16 operands");
#ifdef SMP_CUDAEMU
  ::smp::cudaemu::wgmmaM64K16(std::is_same_v<S, __nv_bfloat16>, 64, d, a,
                              nullptr, b, kTransB, accumulate);
#elif defined(SMP_WGMMA_DEVICE)
  int scale = accumulate ? 1 : 0;
#define SMP_WGMMA_ASM(TYPE)                                                    \
  asm volatile(SMP_WGMMA_HEAD(TYPE, "%34") "%32, %33, p, 1, 1, 0, %35;\n}\n"   \
               : SMP_WGMMA_D                                                   \
               : "l"(a), "l"(b), "r"(scale), "n"(kTransB ? 1 : 0)              \
               : "memory")
  if constexpr (std::is_same_v<S, __nv_bfloat16>)
    SMP_WGMMA_ASM("bf16");
  else
    SMP_WGMMA_ASM("f16");
#undef SMP_WGMMA_ASM
#else
  (void)d, (void)a, (void)b, (void)accumulate;
  __trap(); // not an sm_90a build: callers check the device first
#endif
}

/// The same with A in registers: each warp w its rows [16 w, 16 w + 16) as
/// mma.sync's A fragment (Mma.cuh: a[0] = A[g][2t, 2t+1], a[1] = A[g+8][..],
/// a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][..]), as FlashAttention's
/// probabilities are; they must stay unchanged until the product is waited
/// for.
template <class S, bool kTransB = false>
__device__ inline void wgmmaM64N64K16(float (&d)[32], const uint32_t (&a)[4],
                                      uint64_t b, bool accumulate) {
  static_assert(kHalf<S>, "wgmma takes f16 or bf16 operands");
#ifdef SMP_CUDAEMU
  ::smp::cudaemu::wgmmaM64K16(std::is_same_v<S, __nv_bfloat16>, 64, d, 0, a, b,
                              kTransB, accumulate);
#elif defined(SMP_WGMMA_DEVICE)
  int scale = accumulate ? 1 : 0;
#define SMP_WGMMA_ASM(TYPE)                                                    \
  asm volatile(                                                                \
      SMP_WGMMA_HEAD(TYPE,                                                     \
                     "%37") "{%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"    \
      : SMP_WGMMA_D                                                            \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale),        \
        "n"(kTransB ? 1 : 0)                                                   \
      : "memory")
  if constexpr (std::is_same_v<S, __nv_bfloat16>)
    SMP_WGMMA_ASM("bf16");
  else
    SMP_WGMMA_ASM("f16");
#undef SMP_WGMMA_ASM
#else
  (void)d, (void)a, (void)b, (void)accumulate;
  __trap(); // not an sm_90a build: callers check the device first
#endif
}

#undef SMP_WGMMA_HEAD
#undef SMP_WGMMA_D
#undef SMP_WGMMA_D8

} // namespace smp::kernels::cuda::detail

#endif // SMP_KERNELS_CUDA_WGMMA_CUH
