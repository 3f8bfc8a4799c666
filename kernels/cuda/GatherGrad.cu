//===- GatherGrad.cu - gather_grad in a fixed order -----------------------===//
//
// gather_grad (an embedding's gradient): out[o, v, i] sums dy[o, k, i] over
// the positions k whose index is v. Scatter-adding dy with atomics (as
// gather_nd_grad and gather_elements_grad still do, GatherIndexed.cu) adds a
// row's repeats in the order the threads happen to run: another order, so
// other last bits, on every run (GPT-2's common tokens are gathered hundreds
// of times a batch). Here the positions are sorted by the row they gathered
// (a stable LSD radix sort, 4 bits a pass, so each row's positions stay in
// increasing order) and each output element sums its positions' dy in that
// order, in double, rounded once: the CPU's counting sort and sums
// (kernels/cpu/Training.cpp), so the same bits as the CPU on every run and
// in any block order. No f32 scratch of out's size either: every output
// element is written once, zero where no position gathered its row.
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

constexpr int kSortThreads = 256; // a tile of positions, one a thread
constexpr int kDigitBits = 4;
constexpr int kDigits = 1 << kDigitBits;
constexpr int kScanThreads = 1024;

/// keys[k]: the row position k gathered (index k normalised), or dim for an
/// index out of range (recorded as a device error; sorted last, summed into
/// no row); vals[k] = k.
__global__ void gatherGradKeys(IndexIn idx, int64_t count, int64_t dim,
                               int64_t axis, int32_t *keys, int32_t *vals,
                               DeviceError *err) {
  SMP_GRID_STRIDE(k, count) {
    int64_t v = idx.checked(k, dim, axis, err, kErrGatherGradIndex);
    keys[k] = static_cast<int32_t>(v >= 0 ? v : dim);
    vals[k] = static_cast<int32_t>(k);
  }
}

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

/// v[0..m) replaced by its exclusive prefix sums (one block: each thread a
/// contiguous run, the runs' totals scanned in shared memory).
__global__ void __launch_bounds__(kScanThreads)
    exclusiveScan(int32_t *v, int64_t m) {
  __shared__ int32_t sums[kScanThreads];
  int64_t per = (m + kScanThreads - 1) / kScanThreads;
  int64_t b = threadIdx.x * per, e = b + per < m ? b + per : m;
  int32_t s = 0;
  for (int64_t i = b; i < e; ++i)
    s += v[i];
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int off = 1; off < kScanThreads; off <<= 1) {
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

/// first[v], v in [0, dim]: the first sorted position whose key is at least
/// v (row v's positions are first[v] .. first[v + 1]).
__global__ void runStarts(const int32_t *keys, int64_t n, int64_t dim,
                          int32_t *first) {
  SMP_GRID_STRIDE(v, dim + 1) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (keys[mid] < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    first[v] = static_cast<int32_t>(lo);
  }
}

/// out[o, v, i] = the sum, in double and in position order, of dy[o, k, i]
/// over row v's sorted positions k. Eight loads in flight before their adds
/// (in order): a row gathered hundreds of times a batch (a common token)
/// would otherwise wait for each load in turn.
__global__ void sumSortedRows(In dy, Out out, const int32_t *first,
                              const int32_t *positions, int64_t dim,
                              int64_t inner, int64_t count, int64_t n) {
  constexpr int kInFlight = 8;
  SMP_GRID_STRIDE(t, n) {
    int64_t i = t % inner, rest = t / inner;
    int64_t v = rest % dim, o = rest / dim;
    const int64_t base = o * count * inner + i;
    int32_t h = first[v];
    const int32_t e = first[v + 1];
    double acc = 0;
    for (; h + kInFlight <= e; h += kInFlight) {
      double x[kInFlight];
#pragma unroll
      for (int j = 0; j < kInFlight; ++j)
        x[j] = dy.load(base + static_cast<int64_t>(positions[h + j]) * inner);
#pragma unroll
      for (int j = 0; j < kInFlight; ++j)
        acc += x[j];
    }
    for (; h < e; ++h)
      acc += dy.load(base + static_cast<int64_t>(positions[h]) * inner);
    out.store(t, acc);
  }
}

/// The radix sort's passes: the bits of the largest key (dim) in digits.
int sortPasses(int64_t dim) {
  int bits = 0;
  while (bits < 63 && (int64_t(1) << bits) <= dim)
    ++bits;
  return (bits + kDigitBits - 1) / kDigitBits;
}

} // namespace

Status gatherGrad(const TensorRef &indices, const TensorRef &dy, int64_t axis,
                  const TensorRef &out) {
  const char *op = "gather_grad";
  GatherGradGeom g;
  SMP_RETURN_IF_ERROR(common::checkGatherGrad(indices, dy, axis, out, g));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  if (g.count >= INT32_MAX || g.dim >= INT32_MAX)
    return fail(op, std::to_string(g.count) + " indices into " +
                        std::to_string(g.dim) +
                        " rows: more than 2^31 - 2 of either is not "
                        "supported on the GPU");
  int64_t n = out.numel(), count = g.count;
  if (n == 0)
    return Status::success();
  cudaStream_t s = ctx->stream;
  int64_t tiles = (count + kSortThreads - 1) / kSortThreads;
  // Keys and positions twice (each pass writes the other pair), the digit
  // counts, and the rows' first positions.
  Scratch keys[2], vals[2], counts, first;
  for (int b = 0; b < 2; ++b) {
    SMP_RETURN_IF_ERROR(keys[b].allocate(op, count * sizeof(int32_t), s));
    SMP_RETURN_IF_ERROR(vals[b].allocate(op, count * sizeof(int32_t), s));
  }
  SMP_RETURN_IF_ERROR(
      counts.allocate(op, kDigits * tiles * sizeof(int32_t), s));
  SMP_RETURN_IF_ERROR(first.allocate(op, (g.dim + 1) * sizeof(int32_t), s));
  int cur = 0;
  if (count > 0) {
    gatherGradKeys<<<gridFor(count), kThreads, 0, s>>>(
        asIndexIn(indices), count, g.dim, g.axis, keys[0].as<int32_t>(),
        vals[0].as<int32_t>(), ctx->dError);
    SMP_RETURN_IF_ERROR(launchStatus(op));
    auto blocks = static_cast<unsigned>(tiles);
    for (int p = 0, passes = sortPasses(g.dim); p < passes; ++p) {
      int shift = p * kDigitBits;
      digitCounts<<<blocks, kSortThreads, 0, s>>>(
          keys[cur].as<int32_t>(), count, shift, counts.as<int32_t>());
      exclusiveScan<<<1, kScanThreads, 0, s>>>(counts.as<int32_t>(),
                                               kDigits * tiles);
      digitScatter<<<blocks, kSortThreads, 0, s>>>(
          keys[cur].as<int32_t>(), vals[cur].as<int32_t>(), count, shift,
          counts.as<int32_t>(), keys[1 - cur].as<int32_t>(),
          vals[1 - cur].as<int32_t>());
      SMP_RETURN_IF_ERROR(launchStatus(op));
      cur = 1 - cur;
    }
  }
  runStarts<<<gridFor(g.dim + 1), kThreads, 0, s>>>(
      keys[cur].as<int32_t>(), count, g.dim, first.as<int32_t>());
  SMP_RETURN_IF_ERROR(launchStatus(op));
  sumSortedRows<<<gridFor(n), kThreads, 0, s>>>(
      asIn(dy), asOut(out), first.as<int32_t>(), vals[cur].as<int32_t>(), g.dim,
      g.inner, count, n);
  return launchStatus(op);
}

} // namespace smp::kernels::cuda
