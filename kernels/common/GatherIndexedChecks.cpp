//===- GatherIndexedChecks.cpp - Checks of gather_nd / gather_elements ----===//
//
// Argument checks and geometry of the indexed gathers and their gradients,
// shared by kernels/cpu and kernels/cuda (the index values themselves are
// checked by each library's kernels as they read them).
//
//===----------------------------------------------------------------------===//

#include "smp/kernels/common/OpChecks.h"

#include <algorithm>

namespace smp::kernels::common {
namespace {

/// The geometry of gathering tuples of `indices` from a tensor of `data`'s
/// shape; checks the indices and that `gathered` (named `what`: gather_nd's
/// output or its gradient's dy) has the gathered shape.
Status geometryNd(const char *op, const std::vector<int64_t> &data,
                  const TensorRef &indices, int64_t b, const char *what,
                  const TensorRef &gathered, GatherNdGeom &g) {
  SMP_RETURN_IF_ERROR(checkIndices(op, indices));
  const std::vector<int64_t> &ix = indices.shape;
  int64_t r = static_cast<int64_t>(data.size()),
          q = static_cast<int64_t>(ix.size());
  if (r < 1 || q < 1 || b < 0 || b >= std::min(r, q))
    return fail(op, "batch_dims " + std::to_string(b) +
                        " must be in [0, min(rank(data), rank(indices))) "
                        "for data " + shapeStr(data) + ", indices " +
                        shapeStr(ix));
  int64_t k = ix.back();
  if (k < 1 || k > r - b)
    return fail(op, "the last dim of indices " + shapeStr(ix) +
                        " must be in [1, " + std::to_string(r - b) + "]");
  for (int64_t d = 0; d < b; ++d)
    if (data[d] != ix[d])
      return fail(op, "batch dim " + std::to_string(d) + " differs: data " +
                          shapeStr(data) + ", indices " + shapeStr(ix));
  std::vector<int64_t> strides = contiguousStrides(data);
  g.b = b;
  g.k = k;
  g.positions = product(ix, 0, ix.size() - 1);
  g.perBatch = product(ix, b, ix.size() - 1);
  g.batchStride = b == 0 ? 0 : strides[b - 1];
  g.slice = strides[b + k - 1];
  g.dims.assign(data.begin() + b, data.begin() + b + k);
  g.strides.assign(strides.begin() + b, strides.begin() + b + k);
  std::vector<int64_t> expected(ix.begin(), ix.end() - 1);
  expected.insert(expected.end(), data.begin() + b + k, data.end());
  return checkShape(op, what, gathered, expected);
}

/// gather_elements' normalised axis `a` for a tensor of `data`'s shape;
/// checks the indices and that `gathered` (named `what`) has their shape.
Status geometryElements(const char *op, const std::vector<int64_t> &data,
                        const TensorRef &indices, int64_t axis,
                        const char *what, const TensorRef &gathered,
                        int64_t &a) {
  SMP_RETURN_IF_ERROR(checkIndices(op, indices));
  const std::vector<int64_t> &ix = indices.shape;
  if (data.empty() || ix.size() != data.size())
    return fail(op, "indices " + shapeStr(ix) +
                        " must have the rank of data " + shapeStr(data));
  a = normAxis(axis, static_cast<int64_t>(data.size()));
  if (a < 0)
    return fail(op, "axis " + std::to_string(axis) + " out of range for " +
                        shapeStr(data));
  for (size_t d = 0; d < data.size(); ++d)
    if (static_cast<int64_t>(d) != a && ix[d] > data[d])
      return fail(op, "indices " + shapeStr(ix) + " exceed data " +
                          shapeStr(data) + " in dim " + std::to_string(d));
  return checkShape(op, what, gathered, ix);
}

} // namespace

Status checkGatherNd(const TensorRef &data, const TensorRef &indices,
                     int64_t batchDims, const TensorRef &out,
                     GatherNdGeom &g) {
  const char *op = "gather_nd";
  SMP_RETURN_IF_ERROR(checkPair(op, data, out));
  return geometryNd(op, data.shape, indices, batchDims, "output", out, g);
}

Status checkGatherNdGrad(const TensorRef &indices, const TensorRef &dy,
                         int64_t batchDims, const TensorRef &out,
                         GatherNdGeom &g) {
  const char *op = "gather_nd_grad";
  SMP_RETURN_IF_ERROR(checkFloats(op, {&dy, &out}));
  SMP_RETURN_IF_ERROR(checkDType(op, "grad", dy, out.dtype));
  return geometryNd(op, out.shape, indices, batchDims, "grad", dy, g);
}

Status checkGatherElements(const TensorRef &data, const TensorRef &indices,
                           int64_t axis, const TensorRef &out, int64_t &a) {
  const char *op = "gather_elements";
  SMP_RETURN_IF_ERROR(checkPair(op, data, out));
  return geometryElements(op, data.shape, indices, axis, "output", out, a);
}

Status checkGatherElementsGrad(const TensorRef &indices, const TensorRef &dy,
                               int64_t axis, const TensorRef &out,
                               int64_t &a) {
  const char *op = "gather_elements_grad";
  SMP_RETURN_IF_ERROR(checkFloats(op, {&dy, &out}));
  SMP_RETURN_IF_ERROR(checkDType(op, "grad", dy, out.dtype));
  return geometryElements(op, out.shape, indices, axis, "grad", dy, a);
}

} // namespace smp::kernels::common
