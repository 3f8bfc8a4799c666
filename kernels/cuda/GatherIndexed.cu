//===- GatherIndexed.cu - gather_nd, gather_elements and their grads ------===//
//
// One thread per output (or gradient) element computes its data offset from
// the indices it reads; an index out of range is a device error naming it
// (reported at the next synchronisation, as gather's). The gradients sort
// dy's elements by the offset each adds into (SortByKey.cuh) and sum each
// offset's in dy's order, in double, as the CPU does: repeated indices add
// up to the CPU's bits on every run.
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

/// The data offset gather_elements' element t reads, or -1.
__device__ inline int64_t sourceOffset(const ElGeom &g, int64_t t,
                                       DeviceError *err, int code) {
  int64_t v = g.idx.checked(t, g.dim, g.axis, err, code);
  if (v < 0)
    return -1;
  int64_t off = 0, rest = t;
  for (int d = g.rank - 1; d >= 0; --d) {
    int64_t c = rest % g.shape[d];
    rest /= g.shape[d];
    off += (d == g.axis ? v : c) * g.strides[d];
  }
  return off;
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
  common::GatherElementsGeom g;
  SMP_RETURN_IF_ERROR(
      common::checkGatherElements(true, out, indices, axis, dy, g));
  return scatterIndexed<ElGeom>("gather_elements_grad", dy, indices, g, out,
                                kErrGatherElementsGradIndex);
}

} // namespace smp::kernels::cuda
