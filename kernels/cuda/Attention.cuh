//===- Attention.cuh - What the attention kernels share ----------*- C++
//-*-===//
//
// The arguments and mask rule of every attention kernel, the tile launch,
// and the tensor-core path's entry points (AttentionMma.cu), which
// Attention.cu's attention and attention_grad use when they take the case.
// Private to kernels/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_ATTENTION_CUH
#define SMP_KERNELS_CUDA_ATTENTION_CUH

#include "Common.cuh"

#include "smp/kernels/common/Dropout.h"

namespace smp::kernels::cuda::detail {

/// What every attention kernel reads besides its tensors (plain data).
struct AttnArgs {
  common::AttentionDims g;
  float scale;
  bool causal;
  const void *mask; // null: none
  bool dropout;     // a dropout on the probabilities, keyed by `drop`
  common::DropoutPlan drop;
};

/// The rows of one head of an operand: where row 0 starts (elements) and
/// the elements between rows. A tensor of `heads` heads of `len` rows of
/// `dim` is [B, heads, len, dim], or [B, len, heads, dim] when g.bshd; a
/// `packed` operand (q, k, v and their gradients) has rows g.qkvLd apart
/// when that is set (its pointer already at its first head).
struct HeadRows {
  int64_t start, ld;
};
__host__ __device__ inline HeadRows headRows(const common::AttentionDims &g,
                                             int64_t b, int64_t h,
                                             int64_t heads, int64_t len,
                                             int64_t dim, bool packed) {
  if (g.bshd) {
    int64_t ld = packed && g.qkvLd ? g.qkvLd : heads * dim;
    return {b * len * ld + h * dim, ld};
  }
  return {(b * heads + h) * len * dim, dim};
}
/// Query head h's rows of q and dq.
__host__ __device__ inline HeadRows queryRows(const common::AttentionDims &g,
                                              int64_t b, int64_t h) {
  return headRows(g, b, h, g.hq, g.s, g.d, true);
}
/// Query head h's rows of out and dout (never packed).
__host__ __device__ inline HeadRows outRows(const common::AttentionDims &g,
                                            int64_t b, int64_t h) {
  return headRows(g, b, h, g.hq, g.s, g.dv, false);
}
/// Key/value head kvh's rows of k and dk (dim g.d) or of v and dv (g.dv).
__host__ __device__ inline HeadRows
keyRows(const common::AttentionDims &g, int64_t b, int64_t kvh, int64_t dim) {
  return headRows(g, b, kvh, g.hkv, g.sk, dim, true);
}

/// The mask's contribution at (b, h, i, j): false when key j is not
/// allowed for query i, else `add` is added to the score.
template <class S>
__device__ bool maskAt(const AttnArgs &a, int64_t b, int64_t h, int64_t i,
                       int64_t j, float &add) {
  add = 0.0f;
  if (a.causal && j > i)
    return false;
  if (!a.mask)
    return true;
  const int64_t *st = a.g.maskStride;
  int64_t e = b * st[0] + h * st[1] + i * st[2] + j * st[3];
  if (a.g.boolMask)
    return static_cast<const uint8_t *>(a.mask)[e] != 0;
  add = FT<S>::load(static_cast<const S *>(a.mask)[e]);
  return add != -INFINITY;
}

/// The dropout's factor of P's element (b, h, i, j): 1 without dropout,
/// else 1 / (1 - ratio) where the mask keeps it and 0 where it drops it
/// (the mask of the element's global index: the CPU's and the unfused
/// dropout's).
__device__ inline float dropFactor(const AttnArgs &a, int64_t b, int64_t h,
                                   int64_t i, int64_t j) {
  if (!a.dropout)
    return 1.0f;
  int64_t row = (b * a.g.hq + h) * a.g.s + i;
  uint64_t g =
      static_cast<uint64_t>(common::dropoutRowBase(a.drop, row, a.g.sk) + j);
  return common::dropoutKeepsGlobal(a.drop, g) ? a.drop.scale : 0.0f;
}

inline int blocksOf(int64_t n, int64_t tile) {
  return static_cast<int>((n + tile - 1) / tile);
}

/// Launches `kernel` over [ceil(rows / tile), heads, batch] blocks of
/// `threads` threads with `bytes` of dynamic shared memory, or fails naming the
/// head dims when the device has less.
template <class K, class... Args>
Status launchTiles(const char *op, K kernel, size_t bytes, int64_t rows,
                   int tile, int64_t heads, int threads,
                   const common::AttentionDims &g, const Context &ctx,
                   Args... args) {
  int most = 0;
  SMP_RETURN_IF_ERROR(cudaStatus(
      op, cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                 ctx.device)));
  if (bytes > static_cast<size_t>(most))
    return fail(op, "head dims D = " + std::to_string(g.d) +
                        ", Dv = " + std::to_string(g.dv) + " need " +
                        std::to_string(bytes) +
                        " bytes of shared memory per block, the device has " +
                        std::to_string(most));
  SMP_RETURN_IF_ERROR(cudaStatus(
      op,
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes))));
  dim3 grid(blocksOf(rows, tile), static_cast<unsigned>(heads),
            static_cast<unsigned>(g.b));
  kernel<<<grid, threads, bytes, ctx.stream>>>(args...); // cudaemu-name: op
  return launchStatus(op);
}

/// The arguments of a checked call (its dropout key resolved: a key that
/// does not fit fails, naming `op`).
inline Status makeArgs(const char *op, const common::AttentionDims &g,
                       const TensorRef *mask, float scale, bool causal,
                       const DropoutKey *dropout, AttnArgs &a) {
  a = AttnArgs();
  a.g = g;
  a.scale = scale;
  a.causal = causal;
  a.mask = mask && mask->numel() > 0 ? mask->data : nullptr;
  a.dropout = common::attentionDrops(dropout);
  if (a.dropout)
    return common::planAttentionDropout(op, *dropout, g, a.drop);
  return Status::success();
}

/// The forward on the tensor cores (attentionOnTensorCores is true).
Status attentionMma(const char *op, const AttnArgs &a, DType t,
                    const Context &ctx, const TensorRef &q, const TensorRef &k,
                    const TensorRef &v, const TensorRef &out,
                    const TensorRef &lse);
/// attentionMma's forward on wgmma (AttentionWgmma.cu: f16/bf16, D = Dv
/// = 64, no dropout; the caller checks), for ctx.attentionWgmmaForward.
Status attentionForwardWgmma(const char *op, const AttnArgs &a, DType t,
                             const Context &ctx, const TensorRef &q,
                             const TensorRef &k, const TensorRef &v,
                             const TensorRef &out, const TensorRef &lse);

/// The backward on the tensor cores (attentionOnTensorCores is true): dk and dv
/// when either has elements, dq when it has.
Status attentionGradMma(const char *op, const AttnArgs &a, DType t,
                        const Context &ctx, const TensorRef &q,
                        const TensorRef &k, const TensorRef &v,
                        const TensorRef &out, const TensorRef &lse,
                        const TensorRef &dout, const TensorRef &dq,
                        const TensorRef &dk, const TensorRef &dv);

/// attentionGradMma's two passes on wgmma (AttentionWgmmaGrad.cu: f16/bf16,
/// D = Dv = 64, no dropout; the caller checks), for
/// ctx.attentionWgmmaBackward, after attnDsum wrote stat (a float2 a query
/// row).
Status attentionGradWgmma(const char *op, const AttnArgs &a, DType t,
                          const Context &ctx, const TensorRef &q,
                          const TensorRef &k, const TensorRef &v,
                          const float2 *stat, const TensorRef &dout,
                          const TensorRef &dq, const TensorRef &dk,
                          const TensorRef &dv);

} // namespace smp::kernels::cuda::detail

#endif // SMP_KERNELS_CUDA_ATTENTION_CUH
