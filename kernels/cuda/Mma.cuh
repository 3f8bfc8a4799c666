//===- Mma.cuh - Tensor-core fragments for the CUDA kernels ------*- C++
//-*-===//
//
// The warp-wide mma.sync.m16n8k16 product of 16-bit operands with f32
// accumulation (sm_80 and later, H100/H200 included), the ldmatrix loads
// that fill its fragments from shared memory, and cp.async copies from
// global to shared memory. Fragment layouts are PTX's (PTX ISA,
// "Matrix Fragments for mma.m16n8k16 with floating point type"); with
// g = lane / 4 and t = lane % 4:
//
//   A (16 x 16, row-major): a[0] = A[g][2t, 2t+1],   a[1] = A[g+8][2t, 2t+1],
//                           a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8, "col"):      b[0] = B[2t, 2t+1][g],   b[1] = B[2t+8, 2t+9][g]
//   C (16 x 8, f32):        c[0], c[1] = C[g][2t, 2t+1],
//                           c[2], c[3] = C[g+8][2t, 2t+1]
//
// (two 16-bit values per 32-bit register, the lower index in the low half).
// Two C fragments side by side (columns 16 k .. 16 k + 15) are, packed to
// 16 bits, the A fragment of the next product's k-step k: FlashAttention's
// probabilities never leave the registers.
//
// The asm statements that touch shared memory clobber "memory": the
// compiler keeps the kernel's own shared-memory loads and stores in order
// with them.
//
// In the CUDA emulator (SMP_CUDAEMU) the product and ldmatrix are the
// emulator's (kernels/cudaemu/Mma.cpp: the warp's registers exchanged, every
// lane checked to take part), cp.async copies when its group is waited for
// (Fibers.cpp: a read before the wait sees the old bytes), and plain loads
// are memcpy (no type punning in host C++).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_MMA_CUH
#define SMP_KERNELS_CUDA_MMA_CUH

#include "Common.cuh"

#include <cstring>

namespace smp::kernels::cuda::detail {

/// The 16 bits of one element.
template <class S> __device__ inline uint32_t bitsOf(S v) {
  uint16_t u;
#ifdef SMP_CUDAEMU
  std::memcpy(&u, &v, sizeof(u));
#else
  if constexpr (std::is_same_v<S, __half>)
    u = __half_as_ushort(v);
  else
    u = __bfloat16_as_ushort(v);
#endif
  return u;
}

/// lo and hi rounded to S, in one register.
template <class S> __device__ inline uint32_t pack2(float lo, float hi) {
  return bitsOf(FT<S>::store(lo)) | (bitsOf(FT<S>::store(hi)) << 16);
}

/// 16 bytes from src to dst (both 16-byte aligned).
__device__ inline void copy16(void *dst, const void *src) {
#ifdef SMP_CUDAEMU
  std::memcpy(dst, src, 16);
#else
  *static_cast<uint4 *>(dst) = *static_cast<const uint4 *>(src);
#endif
}

/// 16 zero bytes at dst (16-byte aligned).
__device__ inline void zero16(void *dst) {
#ifdef SMP_CUDAEMU
  std::memset(dst, 0, 16);
#else
  *static_cast<uint4 *>(dst) = make_uint4(0, 0, 0, 0);
#endif
}

/// c += a b on the tensor cores for one warp: A 16 x 16, B 16 x 8 of S,
/// C 16 x 8 f32. Every lane of the warp calls it with its fragments.
template <class S>
__device__ inline void mma16816(float (&c)[4], const uint32_t (&a)[4],
                                uint32_t b0, uint32_t b1) {
  static_assert(kHalf<S>, "mma16816 takes f16 or bf16 operands");
#ifdef SMP_CUDAEMU
  const uint32_t b[2] = {b0, b1};
  ::smp::cudaemu::mmaM16N8K16(std::is_same_v<S, __nv_bfloat16>, c, a, b);
#else
  if constexpr (std::is_same_v<S, __nv_bfloat16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
#endif
}

/// ldmatrix.x4 (kTrans: .trans) from shared memory: lane l gives the
/// address of row l % 8 of 8 x 8 matrix l / 8 (16-byte aligned); r[i] is
/// matrix i as an A/B-fragment register (of its transpose with kTrans).
template <bool kTrans>
__device__ inline void ldmatrixX4(uint32_t (&r)[4], const void *row) {
#ifdef SMP_CUDAEMU
  ::smp::cudaemu::ldmatrixX4(kTrans, r, row);
#else
  uint32_t at = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at)
                 : "memory");
#endif
}

/// The A fragment of rows [r0, r0 + 16) and columns [c0, c0 + 16) of a
/// row-major shared-memory tile with row stride ld (elements; rows 16-byte
/// aligned).
template <class S>
__device__ inline void loadA(uint32_t (&a)[4], const S *tile, int64_t ld,
                             int r0, int c0) {
  int l = threadIdx.x % 32, i = l / 8;
  ldmatrixX4<false>(a, tile + (r0 + l % 8 + i % 2 * 8) * ld + c0 + i / 2 * 8);
}

/// The B fragments of B = X^T for a row-major tile X (B[k][n] = X[n][k]),
/// k = columns [c0, c0 + 16) of X, for two n-tiles: rows [r0, r0 + 8) in
/// b[0], b[1] and rows [r0 + 8, r0 + 16) in b[2], b[3].
template <class S>
__device__ inline void loadBt2(uint32_t (&b)[4], const S *tile, int64_t ld,
                               int r0, int c0) {
  int l = threadIdx.x % 32, i = l / 8;
  ldmatrixX4<false>(b, tile + (r0 + l % 8 + i / 2 * 8) * ld + c0 + i % 2 * 8);
}

/// The B fragments of B = X for a row-major tile X, k = rows [r0, r0 + 16),
/// for two n-tiles: columns [c0, c0 + 8) in b[0], b[1] and
/// [c0 + 8, c0 + 16) in b[2], b[3].
template <class S>
__device__ inline void loadB2(uint32_t (&b)[4], const S *tile, int64_t ld,
                              int r0, int c0) {
  int l = threadIdx.x % 32, i = l / 8;
  ldmatrixX4<true>(b, tile + (r0 + l % 8 + i % 2 * 8) * ld + c0 + i / 2 * 8);
}

/// cp.async of kBytes (4, 8 or 16) from global src to shared dst (both
/// kBytes-aligned), in the thread's open group; 16 bytes bypass L1 (.cg,
/// which takes no other size).
template <int kBytes>
__device__ inline void cpAsync(void *dst, const void *src) {
  static_assert(kBytes == 4 || kBytes == 8 || kBytes == 16, "cp.async size");
#ifdef SMP_CUDAEMU
  ::smp::cudaemu::cpAsync(dst, src, kBytes);
#else
  uint32_t at = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  if constexpr (kBytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(at),
                 "l"(src)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(at),
                 "l"(src), "n"(kBytes)
                 : "memory");
#endif
}

/// cp.async.commit_group: the thread's copies since the last commit form a
/// group.
__device__ inline void cpAsyncCommit() {
#ifdef SMP_CUDAEMU
  ::smp::cudaemu::cpAsyncCommit();
#else
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// cp.async.wait_group kN: the thread's committed groups but the newest kN
/// are done (a __syncthreads after it makes them every thread's).
template <int kN> __device__ inline void cpAsyncWait() {
#ifdef SMP_CUDAEMU
  ::smp::cudaemu::cpAsyncWait(kN);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kN) : "memory");
#endif
}

/// The A fragment (k-step kk) made of the C fragments c[2 kk] and
/// c[2 kk + 1], rounded to S.
template <class S>
__device__ inline void packA(uint32_t (&a)[4], const float (&lo)[4],
                             const float (&hi)[4]) {
  a[0] = pack2<S>(lo[0], lo[1]);
  a[1] = pack2<S>(lo[2], lo[3]);
  a[2] = pack2<S>(hi[0], hi[1]);
  a[3] = pack2<S>(hi[2], hi[3]);
}

} // namespace smp::kernels::cuda::detail

#endif // SMP_KERNELS_CUDA_MMA_CUH
