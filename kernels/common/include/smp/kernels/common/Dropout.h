//===- Dropout.h - The random mask of smp.dropout, host and device -*- C++
//-*-===//
//
// smp.dropout's mask is a pure function of (seed, step, the op's stream,
// the element's index in the global tensor): Philox4x32-10 (Salmon et al.,
// "Parallel Random Numbers: As Easy as 1, 2, 3", SC11; the generator of
// cuRAND and PyTorch's CUDA dropout) keyed by the seed, its counter
// (index / 4, the op's stream, the step), one of its four words per
// element. "Global" is the tensor every plan splits: the whole global batch
// and every tensor-parallel shard, so each rank draws its part of the one
// mask a single device draws, and the gradient (the same op on dy) and a
// recomputed forward draw it again instead of storing it. How a rank's
// local tensor sits in the global one is the op's key (DropoutKey, bound
// per rank by the artifact writer); DropoutPlan is that key resolved
// against the local shape, plain data for a CUDA kernel.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_COMMON_DROPOUT_H
#define SMP_KERNELS_COMMON_DROPOUT_H

#include "smp/kernels/Kernels.h"
#include "smp/kernels/common/Checks.h"
#include "smp/kernels/common/Elements.h"

#include <cstdint>
#include <vector>

namespace smp::kernels::common {

/// Philox4x32's multipliers and key increments (Random123's
/// PHILOX_M4x32_0/1, PHILOX_W32_0/1); kernels/cpu's AVX2 draw uses them too.
constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

/// Philox4x32 with 10 rounds: four random 32-bit words of `ctr` under
/// `key` (Random123's philox4x32_R(10, ...)).
SMP_HOST_DEVICE inline void
philox4x32x10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(kPhiloxM0) * c0;
    uint64_t p1 = uint64_t(kPhiloxM1) * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/// A dropout key resolved against the local tensor (planDropout).
struct DropoutPlan {
  uint32_t key[2] = {0, 0};
  uint32_t stream = 0, step = 0;
  /// Where not null, the step's word in device memory, read in place of
  /// `step` (DropoutKey::stepOnDevice: a recorded CUDA graph's step).
  const uint32_t *stepAt = nullptr;
  /// An element is kept when its word is >= threshold (p = ratio); with
  /// dropAll every element is dropped (p = 1).
  uint32_t threshold = 0;
  bool dropAll = false;
  float scale = 1; // 1 / (1 - p)
  /// Global index of local element i: base + i without a split; with a
  /// tensor-parallel split of a dim of local size d (inner: the elements
  /// after it, blockSize = d / blocks), local (o, j, n) sits at
  /// (o, j / blockSize * blockSize * parts + index * blockSize + j %
  /// blockSize, n) of a dim parts times longer.
  int64_t base = 0;
  bool split = false;
  int64_t inner = 1, d = 1, blockSize = 1, parts = 1, index = 0;
};

SMP_HOST_DEVICE inline int64_t dropoutGlobalIndex(const DropoutPlan &p,
                                                  int64_t i) {
  if (!p.split)
    return p.base + i;
  int64_t n = i % p.inner, rest = i / p.inner;
  int64_t j = rest % p.d, o = rest / p.d;
  int64_t jg = j / p.blockSize * p.blockSize * p.parts + p.index * p.blockSize +
               j % p.blockSize;
  return p.base + (o * p.d * p.parts + jg) * p.inner + n;
}

/// The four words drawn for global indices 4 (g / 4) ... 4 (g / 4) + 3.
SMP_HOST_DEVICE inline void dropoutWords(const DropoutPlan &p, uint64_t g,
                                         uint32_t words[4]) {
  uint32_t ctr[4] = {uint32_t(g >> 2), uint32_t(g >> 34), p.stream,
                     p.stepAt ? *p.stepAt : p.step};
  philox4x32x10(ctr, p.key, words);
}

/// Whether the mask keeps the element of global index g.
SMP_HOST_DEVICE inline bool dropoutKeepsGlobal(const DropoutPlan &p,
                                               uint64_t g) {
  if (p.dropAll)
    return false;
  uint32_t words[4];
  dropoutWords(p, g, words);
  return words[g & 3] >= p.threshold;
}

/// Whether the mask keeps local element i.
SMP_HOST_DEVICE inline bool dropoutKeeps(const DropoutPlan &p, int64_t i) {
  return dropoutKeepsGlobal(p, static_cast<uint64_t>(dropoutGlobalIndex(p, i)));
}

/// The global index of element (row, 0) of a tensor whose last dim holds
/// rows of `n` (the attention probabilities' keys); element (row, j) is
/// that plus j whenever the split dim is not the last one (the attention's
/// plan, planAttentionDropout, refuses a split of it).
SMP_HOST_DEVICE inline int64_t dropoutRowBase(const DropoutPlan &p, int64_t row,
                                              int64_t n) {
  return dropoutGlobalIndex(p, row * n);
}

/// dropout's arguments (a float input, an output like it) and its key
/// against the input's shape, resolved into `plan`.
Status planDropout(const smp::kernels::DropoutKey &key, const TensorRef &in,
                   const TensorRef &out, DropoutPlan &plan);

/// The key resolved against a tensor of `shape` (what planDropout does
/// once the arguments are checked; the fused attention's probabilities
/// [B, Hq, S, Sk] exist only as this shape).
Status planDropoutOver(const smp::kernels::DropoutKey &key,
                       const std::vector<int64_t> &shape, DropoutPlan &plan);

struct AttentionDims;

/// Whether an attention call drops its probabilities: a key of ratio other
/// than 0 (one outside [0, 1] is planAttentionDropout's error).
inline bool attentionDrops(const smp::kernels::DropoutKey *key) {
  return key && key->ratio != 0;
}

/// The key of an attention call's dropout on its probabilities, resolved
/// against their shape [B, Hq, S, Sk] (local: this rank's heads, its
/// samples). A split of the keys' dim is refused: the kernels step along a
/// row's keys from dropoutRowBase.
Status planAttentionDropout(const char *op, const smp::kernels::DropoutKey &key,
                            const AttentionDims &g, DropoutPlan &plan);

} // namespace smp::kernels::common

#endif // SMP_KERNELS_COMMON_DROPOUT_H
