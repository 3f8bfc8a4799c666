//===- GatherIndexed.cu - gather_nd, gather_elements and their grads ------===//
//
// One thread per output (or gradient) element computes its data offset from
// the indices it reads; an index out of range is a device error naming it
// (reported at the next synchronisation, as gather's). The gradients sort
// dy's elements by the offset each adds into (SortByKey.cuh) and sum each
// offset's in dy's order, in double, as the CPU does: repeated indices add
// up to the CPU's bits on every run. gather_elements_grad's lines that fit
// shared memory are sorted there, a block a line, with no scratch in
// device memory (scatterLines).
//
//===----------------------------------------------------------------------===//

#include "SortByKey.cuh"

namespace smp::kernels::cuda {
using namespace detail;

namespace {

/// gather_nd's geometry for the device (common::GatherNdGeom, k <= kMaxRank).
struct NdGeom {
  IndexIn idx;
  int64_t b, k, perBatch, batchStride, slice;
  int64_t dims[kMaxRank], strides[kMaxRank];
};

/// gather_elements' geometry: the indices' shape, data's strides.
struct ElGeom {
  IndexIn idx;
  int rank;
  int64_t axis, dim;
  int64_t shape[kMaxRank], strides[kMaxRank];
};

/// The device copy of a geometry (fails past kMaxRank).
Status toDevice(const char *op, const TensorRef &indices,
                const common::GatherNdGeom &g, NdGeom &d) {
  if (g.k > kMaxRank)
    return fail(op, "index tuples of more than " + std::to_string(kMaxRank) +
                        " components are not supported");
  d = NdGeom{asIndexIn(indices), g.b,     g.k, g.perBatch,
             g.batchStride,      g.slice, {},  {}};
  for (int64_t j = 0; j < g.k; ++j) {
    d.dims[j] = g.dims[j];
    d.strides[j] = g.strides[j];
  }
  return Status::success();
}

Status toDevice(const char *op, const TensorRef &indices,
                const common::GatherElementsGeom &g, ElGeom &d) {
  const std::vector<int64_t> &data = g.data;
  int64_t a = g.axis;
  if (data.size() > static_cast<size_t>(kMaxRank))
    return fail(op, "more than " + std::to_string(kMaxRank) +
                        " dims are not supported");
  std::vector<int64_t> strides = contiguousStrides(data);
  d = ElGeom{
      asIndexIn(indices), static_cast<int>(data.size()), a, data[a], {}, {}};
  for (size_t i = 0; i < data.size(); ++i) {
    d.shape[i] = indices.shape[i];
    d.strides[i] = strides[i];
  }
  return Status::success();
}

/// The data offset of element t's slice start (gather_nd, t / slice is
/// the tuple), or -1 after recording error `code`.
__device__ inline int64_t ndOffset(const NdGeom &g, int64_t p,
                                   DeviceError *err, int code) {
  int64_t off = (p / g.perBatch) * g.batchStride;
  for (int64_t j = 0; j < g.k; ++j) {
    int64_t v = g.idx.checked(p * g.k + j, g.dims[j], g.b + j, err, code);
    if (v < 0)
      return -1;
    off += v * g.strides[j];
  }
  return off;
}

/// The data offset gather_nd's element t reads, or -1.
__device__ inline int64_t sourceOffset(const NdGeom &g, int64_t t,
                                       DeviceError *err, int code) {
  int64_t off = ndOffset(g, t / g.slice, err, code);
  return off < 0 ? -1 : off + t % g.slice;
}

/// The data offset of gather_elements' element t's line: its coordinates
/// but the axis's (taken as 0) in data's strides.
__device__ inline int64_t lineOffset(const ElGeom &g, int64_t t) {
  int64_t off = 0, rest = t;
  for (int d = g.rank - 1; d >= 0; --d) {
    int64_t c = rest % g.shape[d];
    rest /= g.shape[d];
    if (d != g.axis)
      off += c * g.strides[d];
  }
  return off;
}

/// The data offset gather_elements' element t reads, or -1.
__device__ inline int64_t sourceOffset(const ElGeom &g, int64_t t,
                                       DeviceError *err, int code) {
  int64_t v = g.idx.checked(t, g.dim, g.axis, err, code);
  return v < 0 ? -1 : lineOffset(g, t) + v * g.strides[g.axis];
}

/// dst[t] = src[sourceOffset(g, t)] (NdGeom or ElGeom).
template <class T, class G>
__global__ void gatherIndexedKernel(const T *src, T *dst, G g, int64_t n,
                                    DeviceError *err, int code) {
  SMP_GRID_STRIDE(t, n) {
    int64_t off = sourceOffset(g, t, err, code);
    dst[t] = off < 0 ? T(0) : src[off];
  }
}

/// keys[t]: the data offset dy's element t adds into (`places` for an
/// index out of range, recorded as `code`: sorted last, added nowhere);
/// vals[t] = t.
template <class G>
__global__ void scatterKeys(G g, int64_t n, int64_t places, int32_t *keys,
                            int32_t *vals, DeviceError *err, int code) {
  SMP_GRID_STRIDE(t, n) {
    int64_t off = sourceOffset(g, t, err, code);
    keys[t] = static_cast<int32_t>(off >= 0 ? off : places);
    vals[t] = static_cast<int32_t>(t);
  }
}

/// out[u] = the sum, in double and in dy's order, of dy's elements that add
/// into u (keys sorted, vals their elements).
__global__ void sumSortedPlaces(In dy, Out out, const int32_t *keys,
                                const int32_t *vals, int64_t count,
                                int64_t places) {
  SMP_GRID_STRIDE(u, places) {
    int64_t h = lowerBound(keys, count, u);
    int64_t e = h + lowerBound(keys + h, count - h, u + 1);
    double acc = 0;
    for (; h < e; ++h)
      acc += dy.load(vals[h]);
    out.store(u, acc);
  }
}

constexpr int kLineThreads = 128;
/// A line's positions plus places past which scatterLines does not run:
/// its shared memory (4 bytes a key, a position, a count and a cursor)
/// stays under 48 KB.
constexpr int64_t kLineMaxElems = 5000;

/// gather_elements_grad's lines: dy's axis length, data's, and dy's
/// elements after the axis (a line's stride).
struct LineDims {
  int64_t li, ld, inner;
};

/// Warp 0 writes each position q of a line into pos[cursor[key[q]]++], in
/// q's order: 32 positions at a time, each after those of the 32 before it
/// with its key (found by comparing keys through shuffles), the key's
/// cursor advanced by its count. Keys: [0, the places]; n: the positions.
__device__ inline void placeStably(const int32_t *key, int32_t *pos,
                                   int32_t *cursor, int64_t n) {
  int lane = threadIdx.x % 32;
  unsigned below = (1u << lane) - 1;
  for (int64_t q0 = 0; q0 < n; q0 += 32) {
    int64_t q = q0 + lane;
    int32_t k = q < n ? key[q] : -1;
    unsigned peers = 0;
#pragma unroll
    for (int j = 0; j < 32; ++j)
      peers |= unsigned(__shfl_sync(0xffffffffu, k, j) == k) << j;
    if (k >= 0)
      pos[cursor[k] + __popc(peers & below)] = static_cast<int32_t>(q);
    __syncwarp();
    if (k >= 0 && (peers & below) == 0) // the first of its key
      cursor[k] += __popc(peers);
    __syncwarp();
  }
}

/// gather_elements_grad a block a line: dy's elements that share every
/// coordinate but the axis's add only into data's line of the same
/// coordinates. The line's positions are sorted by the place they add into
/// in shared memory, stably (the places' counts, their exclusive scan, then
/// placeStably), and each of data's places in the line is the sum of its
/// positions' dy in their order, in double, as the CPU's. An index out of
/// range records `code` and adds nowhere (key ld: after every place).
__global__ void __launch_bounds__(kLineThreads)
    scatterLines(ElGeom g, LineDims d, In dy, Out out, DeviceError *err,
                 int code) {
  extern __shared__ int32_t lineSmem[];
  __shared__ int32_t sums[kLineThreads];
  int32_t *key = lineSmem, *pos = key + d.li, *start = pos + d.li,
          *cursor = start + d.ld + 1;
  int64_t line = blockIdx.x, outer = line / d.inner, in = line % d.inner;
  int64_t t0 = outer * d.li * d.inner + in; // the line's first element
  for (int64_t q = threadIdx.x; q < d.li; q += kLineThreads) {
    int64_t v = g.idx.checked(t0 + q * d.inner, g.dim, g.axis, err, code);
    key[q] = static_cast<int32_t>(v < 0 ? d.ld : v);
  }
  for (int64_t p = threadIdx.x; p <= d.ld; p += kLineThreads)
    start[p] = 0;
  __syncthreads();
  for (int64_t q = threadIdx.x; q < d.li; q += kLineThreads)
    atomicAdd(&start[key[q]], 1); // counts: the same in any order
  __syncthreads();
  blockExclusiveScan<kLineThreads>(start, d.ld + 1, sums);
  __syncthreads();
  for (int64_t p = threadIdx.x; p <= d.ld; p += kLineThreads)
    cursor[p] = start[p];
  __syncthreads();
  if (threadIdx.x < 32)
    placeStably(key, pos, cursor, d.li);
  __syncthreads();
  int64_t base = lineOffset(g, t0), step = g.strides[g.axis];
  for (int64_t p = threadIdx.x; p < d.ld; p += kLineThreads) {
    double acc = 0;
    for (int32_t i = start[p], e = start[p + 1]; i < e; ++i)
      acc += dy.load(t0 + pos[i] * d.inner);
    out.store(base + p * step, acc);
  }
}

/// out = data gathered through the geometry (D: its device copy); an index
/// out of range records `code`.
template <class D, class G>
Status gatherIndexed(const char *op, const TensorRef &data,
                     const TensorRef &indices, const G &geom,
                     const TensorRef &out, int code) {
  D g;
  SMP_RETURN_IF_ERROR(toDevice(op, indices, geom, g));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  return visitBytes(data.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchGrid(op, ctx, out.numel(), gatherIndexedKernel<T, D>,
                      data.as<T>(), out.as<T>(), g, out.numel(), ctx->dError,
                      code);
  });
}

/// out = zeros with dy scatter-added through the geometry (the gradient of
/// gatherIndexed), each place's elements added in dy's order (SortByKey.cuh).
template <class D, class G>
Status scatterIndexed(const char *op, const TensorRef &dy,
                      const TensorRef &indices, const G &geom,
                      const TensorRef &out, int code) {
  D g;
  SMP_RETURN_IF_ERROR(toDevice(op, indices, geom, g));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  int64_t n = dy.numel(), places = out.numel();
  KeySort sort;
  SMP_RETURN_IF_ERROR(allocateKeySort(op, ctx, n, places, sort));
  if (places == 0)
    return Status::success();
  cudaStream_t s = ctx->stream;
  if (n > 0) {
    scatterKeys<D><<<gridFor(n), kThreads, 0, s>>>(
        g, n, places, sort.keys(0), sort.vals(0), ctx->dError, code);
    SMP_RETURN_IF_ERROR(launchStatus(op));
    SMP_RETURN_IF_ERROR(sortByKey(op, ctx, places, sort));
  }
  sumSortedPlaces<<<gridFor(places), kThreads, 0, s>>>(
      asIn(dy), asOut(out), sort.sortedKeys(), sort.sortedVals(), n, places);
  return launchStatus(op);
}

/// gather_elements_grad by scatterLines where its lines fit shared memory
/// and either keep a block busy (32 positions or more) or are so many that
/// the global sort's scratch (16 bytes a dy element) would pass 256 MB;
/// `ran` false otherwise (nothing enqueued).
Status scatterByLines(const char *op, const TensorRef &dy,
                      const TensorRef &indices,
                      const common::GatherElementsGeom &geom,
                      const TensorRef &out, bool &ran) {
  ran = false;
  int64_t n = dy.numel(), axis = geom.axis;
  LineDims d{indices.shape[axis], geom.data[axis], 1};
  for (size_t i = axis + 1; i < indices.shape.size(); ++i)
    d.inner *= indices.shape[i];
  int64_t lines = d.li > 0 ? n / d.li : 0;
  if (n == 0 || d.li + d.ld > kLineMaxElems || lines > INT32_MAX ||
      (d.li < 32 && n < (int64_t(16) << 20)))
    return Status::success();
  ElGeom g;
  SMP_RETURN_IF_ERROR(toDevice(op, indices, geom, g));
  Context *ctx;
  SMP_RETURN_IF_ERROR(requireContext(op, ctx));
  ran = true;
  // Data's places outside the indices' lines (a dim but the axis smaller
  // than data's) stay zero.
  if (lines * d.ld != out.numel())
    SMP_RETURN_IF_ERROR(
        cudaStatus(op, cudaMemsetAsync(out.data, 0, out.bytes(), ctx->stream)));
  size_t smem = sizeof(int32_t) * (2 * d.li + 2 * (d.ld + 1));
  scatterLines<<<static_cast<unsigned>(lines), kLineThreads, smem,
                 ctx->stream>>>(g, d, asIn(dy), asOut(out), ctx->dError,
                                kErrGatherElementsGradIndex);
  return launchStatus(op);
}

} // namespace

Status gatherNd(const TensorRef &data, const TensorRef &indices,
                int64_t batchDims, const TensorRef &out) {
  common::GatherNdGeom g;
  SMP_RETURN_IF_ERROR(
      common::checkGatherNd(false, data, indices, batchDims, out, g));
  return gatherIndexed<NdGeom>("gather_nd", data, indices, g, out,
                               kErrGatherNdIndex);
}

Status gatherElements(const TensorRef &data, const TensorRef &indices,
                      int64_t axis, const TensorRef &out) {
  common::GatherElementsGeom g;
  SMP_RETURN_IF_ERROR(
      common::checkGatherElements(false, data, indices, axis, out, g));
  return gatherIndexed<ElGeom>("gather_elements", data, indices, g, out,
                               kErrGatherElementsIndex);
}

Status gatherNdGrad(const TensorRef &indices, const TensorRef &dy,
                    int64_t batchDims, const TensorRef &out) {
  common::GatherNdGeom g;
  SMP_RETURN_IF_ERROR(
      common::checkGatherNd(true, out, indices, batchDims, dy, g));
  return scatterIndexed<NdGeom>("gather_nd_grad", dy, indices, g, out,
                                kErrGatherNdGradIndex);
}

Status gatherElementsGrad(const TensorRef &indices, const TensorRef &dy,
                          int64_t axis, const TensorRef &out) {
  const char *op = "gather_elements_grad";
  common::GatherElementsGeom g;
  SMP_RETURN_IF_ERROR(
      common::checkGatherElements(true, out, indices, axis, dy, g));
  bool ran = false;
  SMP_RETURN_IF_ERROR(scatterByLines(op, dy, indices, g, out, ran));
  if (ran)
    return Status::success();
  return scatterIndexed<ElGeom>(op, dy, indices, g, out,
                                kErrGatherElementsGradIndex);
}

} // namespace smp::kernels::cuda
