//===- DataMovementChecks.cpp - Checks of copy, transpose, slice, tile, ... ===//

#include "smp/kernels/common/OpChecks.h"

namespace smp::kernels::common {

Status checkCopy(const TensorRef &in, const TensorRef &out) {
  SMP_RETURN_IF_ERROR(checkPair("copy", in, out));
  if (in.numel() != out.numel())
    return fail("copy", "element counts differ: " + smp::base::describe(in) +
                            " to " + smp::base::describe(out));
  return Status::success();
}

Status checkCopyMulti(const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out) {
  const char *op = "copy_multi";
  if (in.size() != out.size())
    return fail(op, std::to_string(in.size()) + " inputs but " +
                        std::to_string(out.size()) + " outputs");
  for (size_t i = 0; i < in.size(); ++i) {
    SMP_RETURN_IF_ERROR(checkCopy(in[i], out[i]));
    if (in[i].dtype != in[0].dtype)
      return fail(op, "input #" + std::to_string(i) + " is " +
                          smp::base::describe(in[i]) + ", input #0 " +
                          smp::base::describe(in[0]) + ": one dtype for all");
  }
  return Status::success();
}

Status checkTranspose(const TensorRef &in, const std::vector<int64_t> &perm,
                      const TensorRef &out, std::vector<int64_t> &strides) {
  const char *op = "transpose";
  SMP_RETURN_IF_ERROR(checkPair(op, in, out));
  int64_t rank = in.rank();
  if (static_cast<int64_t>(perm.size()) != rank)
    return fail(op, "permutation of size " + std::to_string(perm.size()) +
                        " for rank " + std::to_string(rank));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  std::vector<int64_t> inStrides = contiguousStrides(in.shape), expected;
  strides.clear();
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      return fail(op, "invalid permutation " + shapeStr(perm));
    seen[p] = true;
    strides.push_back(inStrides[p]);
    expected.push_back(in.shape[p]);
  }
  return checkShape(op, "output", out, expected);
}

Status checkSlice(const TensorRef &in, const std::vector<int64_t> &starts,
                  const std::vector<int64_t> &steps, const TensorRef &out) {
  const char *op = "slice";
  SMP_RETURN_IF_ERROR(checkPair(op, in, out));
  int64_t rank = in.rank();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank || out.rank() != rank)
    return fail(op, "starts, steps and output must have rank " +
                        std::to_string(rank));
  return Status::success();
}

Status sliceGeometry(const char *op, const TensorRef &full,
                     const std::vector<int64_t> &starts,
                     const std::vector<int64_t> &steps,
                     const std::vector<int64_t> &counts, int64_t &base,
                     std::vector<int64_t> &strides) {
  int64_t rank = full.rank();
  std::vector<int64_t> fullStrides = contiguousStrides(full.shape);
  strides.assign(static_cast<size_t>(rank), 0);
  base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t last = starts[d] + (counts[d] - 1) * steps[d];
    if (steps[d] == 0 || starts[d] < 0 || starts[d] >= full.shape[d] ||
        last < 0 || last >= full.shape[d])
      return fail(op, "dim " + std::to_string(d) + ": start " +
                          std::to_string(starts[d]) + ", step " +
                          std::to_string(steps[d]) + " and " +
                          std::to_string(counts[d]) +
                          " elements leave the input " +
                          smp::base::describe(full));
    base += starts[d] * fullStrides[d];
    strides[d] = steps[d] * fullStrides[d];
  }
  return Status::success();
}

Status checkExpand(const TensorRef &in, const TensorRef &out,
                   std::vector<int64_t> &strides) {
  const char *op = "expand";
  SMP_RETURN_IF_ERROR(checkPair(op, in, out));
  if (!broadcastStrides(in.shape, out.shape, strides))
    return fail(op, "cannot broadcast " + smp::base::describe(in) + " to " +
                        shapeStr(out.shape));
  return Status::success();
}

Status checkTile(const TensorRef &in, const std::vector<int64_t> &repeats,
                 const TensorRef &out, std::vector<int64_t> &shape,
                 std::vector<int64_t> &strides) {
  const char *op = "tile";
  SMP_RETURN_IF_ERROR(checkPair(op, in, out));
  int64_t rank = in.rank();
  if (static_cast<int64_t>(repeats.size()) != rank)
    return fail(op, std::to_string(repeats.size()) + " repeats for " +
                        smp::base::describe(in));
  std::vector<int64_t> inStrides = contiguousStrides(in.shape), expected;
  shape.clear();
  strides.clear();
  for (int64_t d = 0; d < rank; ++d) {
    if (repeats[d] < 0)
      return fail(op, "negative repeat " + std::to_string(repeats[d]));
    expected.push_back(in.shape[d] * repeats[d]);
    shape.insert(shape.end(), {repeats[d], in.shape[d]});
    strides.insert(strides.end(), {0, inStrides[d]});
  }
  return checkShape(op, "output", out, expected);
}

Status checkConcatSplit(const char *op, bool toOut,
                        const std::vector<TensorRef> &parts, int64_t axis,
                        const TensorRef &whole, int64_t &a) {
  SMP_RETURN_IF_ERROR(checkTensor(op, toOut ? "output" : "input", whole));
  int64_t rank = whole.rank();
  a = normAxis(axis, rank);
  if (a < 0)
    return fail(op, "axis " + std::to_string(axis) + " out of range for " +
                        smp::base::describe(whole));
  if (parts.empty())
    return fail(op, "no operands");
  int64_t total = 0;
  for (const TensorRef &p : parts) {
    const char *what = toOut ? "input" : "output";
    SMP_RETURN_IF_ERROR(checkTensor(op, what, p));
    SMP_RETURN_IF_ERROR(checkDType(op, what, p, whole.dtype));
    bool ok = p.rank() == rank;
    for (int64_t d = 0; ok && d < rank; ++d)
      ok = d == a || p.shape[d] == whole.shape[d];
    if (!ok)
      return fail(op, std::string(what) + " " + smp::base::describe(p) +
                          " does not match " + smp::base::describe(whole) +
                          " outside axis " + std::to_string(a));
    total += p.shape[a];
  }
  if (total != whole.shape[a])
    return fail(op, "sizes along axis " + std::to_string(a) + " sum to " +
                        std::to_string(total) + ", expected " +
                        std::to_string(whole.shape[a]));
  return Status::success();
}

Status checkGather(const TensorRef &data, const TensorRef &indices,
                   int64_t axis, const TensorRef &out, int64_t &a) {
  const char *op = "gather";
  SMP_RETURN_IF_ERROR(checkPair(op, data, out));
  SMP_RETURN_IF_ERROR(checkIndices(op, indices));
  a = normAxis(axis, data.rank());
  if (a < 0)
    return fail(op, "axis " + std::to_string(axis) + " out of range for " +
                        smp::base::describe(data));
  std::vector<int64_t> expected(data.shape.begin(), data.shape.begin() + a);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), data.shape.begin() + a + 1, data.shape.end());
  return checkShape(op, "output", out, expected);
}

Status checkTrilu(const TensorRef &in, const TensorRef &out) {
  const char *op = "trilu";
  SMP_RETURN_IF_ERROR(checkSameTensor(op, in, out));
  if (in.rank() < 2)
    return fail(op, "input " + smp::base::describe(in) + " needs two dims");
  return Status::success();
}

} // namespace smp::kernels::common
