//===- GatherIndexed.cpp - gather_nd, gather_elements and their grads -----===//
//
// Each index is read and checked once into an element offset of the data;
// the forward copies (split over threads: each output element is written by
// one thread, so the result does not depend on the thread count) and the
// gradients scatter-add in double in one fixed order, serially (repeated
// indices add up in index order, whatever the thread count).
//
//===----------------------------------------------------------------------===//

#include "smp/kernels/cpu/Training.h"

#include "Common.h"

namespace smp::kernels::cpu {
using namespace detail;

namespace {

/// Index k of `indices` normalised into [0, dim), or a failure naming it.
Status loadIndex(const char *op, const TensorRef &indices, int64_t k,
                 int64_t dim, int64_t axis, int64_t &v) {
  bool huge =
      indices.dtype == DType::U64 &&
      static_cast<const uint64_t *>(indices.data)[k] > uint64_t(INT64_MAX);
  v = loadInt(indices, k);
  if (huge || v < -dim || v >= dim)
    return fail(op, "index " +
                        (huge ? std::to_string(static_cast<const uint64_t *>(
                                    indices.data)[k])
                              : std::to_string(v)) +
                        " at position " + std::to_string(k) +
                        " is out of range for axis " + std::to_string(axis) +
                        " of size " + std::to_string(dim));
  if (v < 0)
    v += dim;
  return Status::success();
}

/// The data offset of each index tuple's slice (gather_nd).
Status sourceOffsets(const char *op, const TensorRef &indices,
                     const GatherNdGeom &g, std::vector<int64_t> &offsets) {
  offsets.assign(static_cast<size_t>(g.positions), 0);
  for (int64_t p = 0; p < g.positions; ++p) {
    int64_t off = (p / g.perBatch) * g.batchStride;
    for (int64_t j = 0; j < g.k; ++j) {
      int64_t v;
      SMP_RETURN_IF_ERROR(
          loadIndex(op, indices, p * g.k + j, g.dims[j], g.b + j, v));
      off += v * g.strides[j];
    }
    offsets[p] = off;
  }
  return Status::success();
}

/// The data offset each element of `indices` reads (gather_elements).
Status sourceOffsets(const char *op, const TensorRef &indices,
                     const GatherElementsGeom &g,
                     std::vector<int64_t> &offsets) {
  const std::vector<int64_t> &ix = indices.shape, &data = g.data;
  int64_t a = g.axis;
  std::vector<int64_t> strides = contiguousStrides(data), at(ix.size(), 0);
  int64_t n = indices.numel();
  offsets.assign(static_cast<size_t>(n), 0);
  for (int64_t t = 0; t < n; ++t) {
    int64_t v;
    SMP_RETURN_IF_ERROR(loadIndex(op, indices, t, data[a], a, v));
    int64_t off = 0;
    for (size_t d = 0; d < ix.size(); ++d)
      off += (static_cast<int64_t>(d) == a ? v : at[d]) * strides[d];
    offsets[t] = off;
    for (size_t d = ix.size(); d-- > 0;) {
      if (++at[d] < ix[d])
        break;
      at[d] = 0;
    }
  }
  return Status::success();
}

/// Elements read per offset.
int64_t sliceOf(const GatherNdGeom &g) { return g.slice; }
int64_t sliceOf(const GatherElementsGeom &) { return 1; }

/// out[i * slice + s] = data[offsets[i] + s] (g: GatherNdGeom or
/// GatherElementsGeom).
template <class G>
Status gatherIndexed(const char *op, const TensorRef &data,
                     const TensorRef &indices, const G &g,
                     const TensorRef &out) {
  std::vector<int64_t> offsets;
  SMP_RETURN_IF_ERROR(sourceOffsets(op, indices, g, offsets));
  int64_t slice = sliceOf(g);
  if (out.numel() == 0)
    return Status::success();
  int64_t n = static_cast<int64_t>(offsets.size());
  return visitBytes(data.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *src = data.as<T>();
    T *dst = out.as<T>();
    parallelFor(n, grainFor(slice), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        std::copy_n(src + offsets[i], slice, dst + i * slice);
    });
    return Status::success();
  });
}

/// out = zeros; out[offsets[i] + s] += dy[i * slice + s], in order (the
/// gradient of gatherIndexed).
template <class G>
Status scatterIndexed(const char *op, const TensorRef &dy,
                      const TensorRef &indices, const G &g,
                      const TensorRef &out) {
  std::vector<int64_t> offsets;
  SMP_RETURN_IF_ERROR(sourceOffsets(op, indices, g, offsets));
  int64_t slice = sliceOf(g);
  std::vector<double> grad = toDouble(dy), acc(out.numel(), 0.0);
  for (size_t i = 0; i < offsets.size(); ++i)
    for (int64_t s = 0; s < slice; ++s)
      acc[offsets[i] + s] += grad[i * slice + s];
  return storeDouble(op, out, acc);
}

} // namespace

Status gatherNd(const TensorRef &data, const TensorRef &indices,
                int64_t batchDims, const TensorRef &out) {
  GatherNdGeom g;
  SMP_RETURN_IF_ERROR(
      common::checkGatherNd(false, data, indices, batchDims, out, g));
  return gatherIndexed("gather_nd", data, indices, g, out);
}

Status gatherNdGrad(const TensorRef &indices, const TensorRef &dy,
                    int64_t batchDims, const TensorRef &out) {
  GatherNdGeom g;
  SMP_RETURN_IF_ERROR(
      common::checkGatherNd(true, out, indices, batchDims, dy, g));
  return scatterIndexed("gather_nd_grad", dy, indices, g, out);
}

Status gatherElements(const TensorRef &data, const TensorRef &indices,
                      int64_t axis, const TensorRef &out) {
  GatherElementsGeom g;
  SMP_RETURN_IF_ERROR(
      common::checkGatherElements(false, data, indices, axis, out, g));
  return gatherIndexed("gather_elements", data, indices, g, out);
}

Status gatherElementsGrad(const TensorRef &indices, const TensorRef &dy,
                          int64_t axis, const TensorRef &out) {
  GatherElementsGeom g;
  SMP_RETURN_IF_ERROR(
      common::checkGatherElements(true, out, indices, axis, dy, g));
  return scatterIndexed("gather_elements_grad", dy, indices, g, out);
}

} // namespace smp::kernels::cpu
