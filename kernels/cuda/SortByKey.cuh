//===- SortByKey.cuh - A stable sort of positions by 32-bit keys ----------===//
//
// The scatter-adds that must not depend on timing (gather_grad in
// GatherGrad.cu, gather_nd_grad and gather_elements_grad in
// GatherIndexed.cu) sort each dy position by where it adds (its key) and
// then sum every destination's positions in increasing order, as the CPU's
// loops do: the same bits on every run and as the CPU's. The sort is an LSD
// radix sort of 4-bit digits (SortByKey.cu); each pass is stable, so equal
// keys keep their positions' order.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_CUDA_SORTBYKEY_CUH
#define SMP_KERNELS_CUDA_SORTBYKEY_CUH

#include "Common.cuh"

namespace smp::kernels::cuda::detail {

/// Keys and positions for `count` elements, twice (each pass of the sort
/// writes the other pair). Fill keys(0)/vals(0), then sortByKey; the sorted
/// pairs are keys(cur)/vals(cur).
struct KeySort {
  Scratch keyBuf[2], valBuf[2], counts;
  int64_t count = 0;
  int cur = 0;
  int32_t *keys(int b) const { return keyBuf[b].as<int32_t>(); }
  int32_t *vals(int b) const { return valBuf[b].as<int32_t>(); }
  int32_t *sortedKeys() const { return keys(cur); }
  int32_t *sortedVals() const { return vals(cur); }
};

/// Allocates s for `count` elements whose keys lie in [0, maxKey]: refused
/// (naming op) when either passes 32-bit integers.
Status allocateKeySort(const char *op, const Context *ctx, int64_t count,
                       int64_t maxKey, KeySort &s);
/// Sorts s's keys(0)/vals(0) (keys in [0, maxKey]) on ctx's stream.
Status sortByKey(const char *op, const Context *ctx, int64_t maxKey,
                 KeySort &s);

/// v[0..m) replaced by its exclusive prefix sums by a block of kThreads
/// threads: each thread a contiguous run, the runs' totals scanned in
/// `sums` (shared, kThreads entries). Threads of the block may read what
/// others wrote of v after a __syncthreads().
template <int kThreads>
__device__ void blockExclusiveScan(int32_t *v, int64_t m, int32_t *sums) {
  int64_t per = (m + kThreads - 1) / kThreads;
  int64_t b = threadIdx.x * per, e = b + per < m ? b + per : m;
  int32_t s = 0;
  for (int64_t i = b; i < e; ++i)
    s += v[i];
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int off = 1; off < kThreads; off <<= 1) {
    int32_t add = threadIdx.x >= off ? sums[threadIdx.x - off] : 0;
    __syncthreads();
    sums[threadIdx.x] += add;
    __syncthreads();
  }
  int32_t run = threadIdx.x ? sums[threadIdx.x - 1] : 0;
  for (int64_t i = b; i < e; ++i) {
    int32_t x = v[i];
    v[i] = run;
    run += x;
  }
}

/// The first of keys[0, n) (sorted) that is at least v (n when none is).
__device__ inline int64_t lowerBound(const int32_t *keys, int64_t n,
                                     int64_t v) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

} // namespace smp::kernels::cuda::detail

#endif // SMP_KERNELS_CUDA_SORTBYKEY_CUH
