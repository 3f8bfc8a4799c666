//===- GatherGrad.cu - gather_grad in a fixed order -----------------------===//
//
// gather_grad (an embedding's gradient): out[o, v, i] sums dy[o, k, i] over
// the positions k whose index is v. Scatter-adding dy with atomics (the
// kernel before) added a row's repeats in the order the threads happened to
// run: another order, so other last bits, on every run (GPT-2's common
// tokens are gathered hundreds of times a batch). Here the positions are
// sorted by the row they gathered (SortByKey.cuh: stable, so each row's
// positions stay in increasing order) and each output element sums its
// positions' dy in that order, in double, rounded once: the CPU's counting
// sort and sums (kernels/cpu/Training.cpp), so the same bits as the CPU on
// every run and in any block order. No f32 scratch of out's size either:
// every output element is written once, zero where no position gathered
// its row.
//
//===----------------------------------------------------------------------===//

#include "SortByKey.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

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

/// first[v], v in [0, dim]: the first sorted position whose key is at least
/// v (row v's positions are first[v] .. first[v + 1]).
__global__ void runStarts(const int32_t *keys, int64_t n, int64_t dim,
                          int32_t *first) {
  SMP_GRID_STRIDE(v, dim + 1) {
    first[v] = static_cast<int32_t>(lowerBound(keys, n, v));
  }
}

/// out[o, v, i] = the sum, in double and in position order, of dy[o, k, i]
/// over row v's sorted positions k: threadIdx.y a row (o, v), threadIdx.x
/// over its i (no division an element; up to 1,024 threads, so
/// __launch_bounds__). Eight loads in flight before their adds (in order): a
/// row gathered hundreds of times a batch (a common token) would otherwise wait
/// for each load in turn.
__global__ void __launch_bounds__(1024)
    sumSortedRows(In dy, Out out, const int32_t *first,
                  const int32_t *positions, int64_t dim, int64_t inner,
                  int64_t count, int64_t rows) {
  constexpr int kInFlight = 8;
  for (int64_t row =
           static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
       row < rows; row += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    int64_t v = row % dim, o = row / dim;
    const int32_t begin = first[v], end = first[v + 1];
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x) {
      const int64_t base = o * count * inner + i;
      double acc = 0;
      int32_t h = begin;
      for (; h + kInFlight <= end; h += kInFlight) {
        double x[kInFlight];
#pragma unroll
        for (int j = 0; j < kInFlight; ++j)
          x[j] = dy.load(base + static_cast<int64_t>(positions[h + j]) * inner);
#pragma unroll
        for (int j = 0; j < kInFlight; ++j)
          acc += x[j];
      }
      for (; h < end; ++h)
        acc += dy.load(base + static_cast<int64_t>(positions[h]) * inner);
      out.store(row * inner + i, acc);
    }
  }
}

} // namespace

Status gatherGrad(const TensorRef &indices, const TensorRef &dy, int64_t axis,
                  const TensorRef &out) {
  const char *op = "gather_grad";
  GatherGradGeom g;
  SMP_RETURN_IF_ERROR(common::checkGatherGrad(indices, dy, axis, out, g));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  int64_t n = out.numel(), count = g.count;
  KeySort sort;
  SMP_RETURN_IF_ERROR(allocateKeySort(op, ctx, count, g.dim, sort));
  if (n == 0)
    return Status::success();
  cudaStream_t s = ctx->stream;
  if (count > 0) {
    gatherGradKeys<<<gridFor(count), kThreads, 0, s>>>(
        asIndexIn(indices), count, g.dim, g.axis, sort.keys(0), sort.vals(0),
        ctx->dError);
    SMP_RETURN_IF_ERROR(launchStatus(op));
    SMP_RETURN_IF_ERROR(sortByKey(op, ctx, g.dim, sort));
  }
  Scratch first; // the rows' first sorted positions
  SMP_RETURN_IF_ERROR(first.allocate(op, (g.dim + 1) * sizeof(int32_t), s));
  runStarts<<<gridFor(g.dim + 1), kThreads, 0, s>>>(sort.sortedKeys(), count,
                                                    g.dim, first.as<int32_t>());
  SMP_RETURN_IF_ERROR(launchStatus(op));
  // A thread a column up to 1,024 (GPT-2's 768): a row's positions are
  // then one chain of loads a thread, not several in turn. Narrower rows a
  // warp each, 8 to a block.
  int64_t rows = g.outer * g.dim;
  auto across = static_cast<unsigned>(
      std::clamp<int64_t>((g.inner + 31) / 32 * 32, 32, 1024));
  dim3 block(across, std::max(1u, 256 / across));
  sumSortedRows<<<blocksFor((rows + block.y - 1) / block.y), block, 0, s>>>(
      asIn(dy), asOut(out), first.as<int32_t>(), sort.sortedVals(), g.dim,
      g.inner, count, rows);
  return launchStatus(op);
}

} // namespace smp::kernels::cuda
