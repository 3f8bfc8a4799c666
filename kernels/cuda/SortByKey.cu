//===- SortByKey.cu - A stable radix sort of positions by key -------------===//
//
// SortByKey.cuh's sort: an LSD radix sort of 32-bit keys with their 32-bit
// positions, 4 bits a pass, as many passes as the largest key has digits
// (four for GPT-2's 50,304 rows). A pass is three launches over tiles of
// kSortThreads keys: each tile's digit counts, one block's exclusive scan
// of the counts digit by digit (digit d's keys of tile t go after every
// smaller digit's and after digit d's of the tiles before t), and the
// scatter, where a key's place among its tile's keys of the same digit is
// counted by warp ballots: the pass is stable, and its result depends on
// the keys only.
//
//===----------------------------------------------------------------------===//

#include "SortByKey.cuh"

namespace smp::kernels::cuda::detail {

namespace {

constexpr int kSortThreads = 256; // a tile of keys, one a thread
constexpr int kDigitBits = 4;
constexpr int kDigits = 1 << kDigitBits;
constexpr int kScanThreads = 1024;

/// counts[d * tiles + t]: tile t's keys whose digit at `shift` is d.
__global__ void __launch_bounds__(kSortThreads)
    digitCounts(const int32_t *keys, int64_t n, int shift, int32_t *counts) {
  __shared__ int32_t c[kDigits];
  if (threadIdx.x < kDigits)
    c[threadIdx.x] = 0;
  __syncthreads();
  int64_t k = static_cast<int64_t>(blockIdx.x) * kSortThreads + threadIdx.x;
  if (k < n)
    atomicAdd(&c[(keys[k] >> shift) & (kDigits - 1)], 1);
  __syncthreads();
  if (threadIdx.x < kDigits)
    counts[threadIdx.x * static_cast<int64_t>(gridDim.x) + blockIdx.x] =
        c[threadIdx.x];
}

/// v[0..m) replaced by its exclusive prefix sums (one block).
__global__ void __launch_bounds__(kScanThreads)
    exclusiveScan(int32_t *v, int64_t m) {
  __shared__ int32_t sums[kScanThreads];
  blockExclusiveScan<kScanThreads>(v, m, sums);
}

/// One stable pass: tile t's key with digit d goes to offsets[d * tiles + t]
/// (the scanned counts) plus the number of keys before it in the tile with
/// the same digit (ballots a warp, the earlier warps' counts in shared
/// memory).
__global__ void __launch_bounds__(kSortThreads)
    digitScatter(const int32_t *keys, const int32_t *vals, int64_t n, int shift,
                 const int32_t *offsets, int32_t *keysOut, int32_t *valsOut) {
  constexpr int kWarps = kSortThreads / 32;
  __shared__ int32_t warpCounts[kWarps][kDigits];
  int64_t k = static_cast<int64_t>(blockIdx.x) * kSortThreads + threadIdx.x;
  bool live = k < n;
  int32_t key = live ? keys[k] : 0;
  int d = live ? (key >> shift) & (kDigits - 1) : -1;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  unsigned below = (1u << lane) - 1;
  int rank = 0;
#pragma unroll
  for (int b = 0; b < kDigits; ++b) {
    unsigned m = __ballot_sync(0xffffffffu, d == b);
    if (d == b)
      rank = __popc(m & below);
    if (lane == 0)
      warpCounts[warp][b] = __popc(m);
  }
  __syncthreads();
  if (!live)
    return;
  int64_t at = offsets[d * static_cast<int64_t>(gridDim.x) + blockIdx.x] +
               static_cast<int64_t>(rank);
  for (int w = 0; w < warp; ++w)
    at += warpCounts[w][d];
  keysOut[at] = key;
  valsOut[at] = vals[k];
}

/// The passes: the bits of the largest key in digits.
int sortPasses(int64_t maxKey) {
  int bits = 0;
  while (bits < 63 && (int64_t(1) << bits) <= maxKey)
    ++bits;
  return (bits + kDigitBits - 1) / kDigitBits;
}

int64_t tilesOf(int64_t count) {
  return (count + kSortThreads - 1) / kSortThreads;
}

} // namespace

Status allocateKeySort(const char *op, const Context *ctx, int64_t count,
                       int64_t maxKey, KeySort &s) {
  if (count >= INT32_MAX || maxKey >= INT32_MAX)
    return fail(op, std::to_string(count) + " positions adding into " +
                        std::to_string(maxKey) +
                        " places: more than 2^31 - 2 of either is not "
                        "supported on the GPU");
  cudaStream_t st = ctx->stream;
  s.count = count;
  s.cur = 0;
  for (int b = 0; b < 2; ++b) {
    SMP_RETURN_IF_ERROR(s.keyBuf[b].allocate(op, count * sizeof(int32_t), st));
    SMP_RETURN_IF_ERROR(s.valBuf[b].allocate(op, count * sizeof(int32_t), st));
  }
  return s.counts.allocate(op, kDigits * tilesOf(count) * sizeof(int32_t), st);
}

Status sortByKey(const char *op, const Context *ctx, int64_t maxKey,
                 KeySort &s) {
  if (s.count == 0)
    return Status::success();
  int64_t tiles = tilesOf(s.count);
  auto blocks = static_cast<unsigned>(tiles);
  cudaStream_t st = ctx->stream;
  int32_t *counts = s.counts.as<int32_t>();
  for (int p = 0, passes = sortPasses(maxKey); p < passes; ++p) {
    int shift = p * kDigitBits, next = 1 - s.cur;
    digitCounts<<<blocks, kSortThreads, 0, st>>>(s.keys(s.cur), s.count, shift,
                                                 counts);
    exclusiveScan<<<1, kScanThreads, 0, st>>>(counts, kDigits * tiles);
    digitScatter<<<blocks, kSortThreads, 0, st>>>(s.keys(s.cur), s.vals(s.cur),
                                                  s.count, shift, counts,
                                                  s.keys(next), s.vals(next));
    SMP_RETURN_IF_ERROR(launchStatus(op));
    s.cur = next;
  }
  return Status::success();
}

} // namespace smp::kernels::cuda::detail
