//===- Mma.cuh - Tensor-core fragments for the CUDA kernels ------*- C++
//-*-===//
//
// The warp-wide mma.sync.m16n8k16 product of 16-bit operands with f32
// accumulation (sm_80 and later, H100/H200 included) and the loads that fill
// its fragments from shared memory. Fragment layouts are PTX's (PTX ISA,
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
// In the CUDA emulator (SMP_CUDAEMU) the product is the emulator's
// mmaM16N8K16 (kernels/cudaemu/Mma.cpp), which exchanges the warp's
// registers and checks that every lane takes part, and the loads are
// memcpy (no type punning in host C++).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_MMA_CUH
#define SMP_KERNELS_CUDA_MMA_CUH

#include "Common.cuh"

#include <cstring>

namespace smp::kernels::cuda::detail {

/// Whether S is a 16-bit float the tensor cores take (f16, bf16).
template <class S>
constexpr bool kMmaType =
    std::is_same_v<S, __half> || std::is_same_v<S, __nv_bfloat16>;

/// The 32 bits at p (two adjacent 16-bit elements; p 4-byte aligned).
template <class S> __device__ inline uint32_t ld32(const S *p) {
#ifdef SMP_CUDAEMU
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
#else
  return *reinterpret_cast<const uint32_t *>(p);
#endif
}

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

/// p[0] and p[stride] in one register (a B fragment's column pair read from
/// a row-major tile: two rows, one column).
template <class S>
__device__ inline uint32_t ld16x2(const S *p, int64_t stride) {
  return bitsOf(p[0]) | (bitsOf(p[stride]) << 16);
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
  static_assert(kMmaType<S>, "mma16816 takes f16 or bf16 operands");
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

/// The A fragment of rows [r0, r0 + 16) and columns [c0, c0 + 16) of a
/// row-major shared-memory tile with row stride ld.
template <class S>
__device__ inline void loadA(uint32_t (&a)[4], const S *tile, int64_t ld,
                             int r0, int c0) {
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const S *p = tile + (r0 + g) * ld + c0 + 2 * t;
  a[0] = ld32(p);
  a[1] = ld32(p + 8 * ld);
  a[2] = ld32(p + 8);
  a[3] = ld32(p + 8 * ld + 8);
}

/// The B fragment of B = X^T for a row-major tile X (B[k][n] = X[n][k]):
/// k = columns [c0, c0 + 16) of X, n = rows [r0, r0 + 8).
template <class S>
__device__ inline void loadBt(uint32_t &b0, uint32_t &b1, const S *tile,
                              int64_t ld, int r0, int c0) {
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const S *p = tile + (r0 + g) * ld + c0 + 2 * t;
  b0 = ld32(p);
  b1 = ld32(p + 8);
}

/// The B fragment of B = X for a row-major tile X: k = rows [r0, r0 + 16),
/// n = columns [c0, c0 + 8).
template <class S>
__device__ inline void loadB(uint32_t &b0, uint32_t &b1, const S *tile,
                             int64_t ld, int r0, int c0) {
  int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const S *p = tile + (r0 + 2 * t) * ld + c0 + g;
  b0 = ld16x2(p, ld);
  b1 = ld16x2(p + 8 * ld, ld);
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
