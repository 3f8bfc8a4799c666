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

/// The tensors of an indexed gather (data -> gathered output) or, with
/// grad, of its gradient (the gathered dy scattered into `dataLike`, the
/// gradient of data).
Status checkOperands(const char *op, bool grad, const TensorRef &dataLike,
                     const TensorRef &gathered) {
  if (!grad)
    return checkPair(op, dataLike, gathered);
  SMP_RETURN_IF_ERROR(checkFloats(op, {&gathered, &dataLike}));
  return checkDType(op, "grad", gathered, dataLike.dtype);
}

} // namespace

Status checkGatherNd(bool grad, const TensorRef &dataLike,
                     const TensorRef &indices, int64_t b,
                     const TensorRef &gathered, GatherNdGeom &g) {
  const char *op = grad ? "gather_nd_grad" : "gather_nd";
  SMP_RETURN_IF_ERROR(checkOperands(op, grad, dataLike, gathered));
  SMP_RETURN_IF_ERROR(checkIndices(op, indices));
  const std::vector<int64_t> &data = dataLike.shape, &ix = indices.shape;
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
  return checkShape(op, grad ? "grad" : "output", gathered, expected);
}

Status checkGatherElements(bool grad, const TensorRef &dataLike,
                           const TensorRef &indices, int64_t axis,
                           const TensorRef &gathered, GatherElementsGeom &g) {
  const char *op = grad ? "gather_elements_grad" : "gather_elements";
  SMP_RETURN_IF_ERROR(checkOperands(op, grad, dataLike, gathered));
  SMP_RETURN_IF_ERROR(checkIndices(op, indices));
  const std::vector<int64_t> &data = dataLike.shape, &ix = indices.shape;
  g.data = data;
  if (data.empty() || ix.size() != data.size())
    return fail(op, "indices " + shapeStr(ix) +
                        " must have the rank of data " + shapeStr(data));
  g.axis = normAxis(axis, static_cast<int64_t>(data.size()));
  if (g.axis < 0)
    return fail(op, "axis " + std::to_string(axis) + " out of range for " +
                        shapeStr(data));
  for (size_t d = 0; d < data.size(); ++d)
    if (static_cast<int64_t>(d) != g.axis && ix[d] > data[d])
      return fail(op, "indices " + shapeStr(ix) + " exceed data " +
                          shapeStr(data) + " in dim " + std::to_string(d));
  return checkShape(op, grad ? "grad" : "output", gathered, ix);
}

} // namespace smp::kernels::common
