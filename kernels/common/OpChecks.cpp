//===- OpChecks.cpp - Argument checks and geometry of the kernel ops ------===//

#include "smp/kernels/common/OpChecks.h"

#include <utility>

namespace smp::kernels::common {

namespace {

/// checkTensor on each (tensor, what) in order.
Status
checkAll(const char *op,
         std::initializer_list<std::pair<const TensorRef *, const char *>> ts) {
  for (auto [t, what] : ts)
    SMP_RETURN_IF_ERROR(checkTensor(op, what, *t));
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Status checkBinary(const char *op, const TensorRef &lhs, const TensorRef &rhs,
                   const TensorRef &out, bool boolOutput,
                   std::vector<int64_t> &shape, std::vector<int64_t> &sa,
                   std::vector<int64_t> &sb) {
  SMP_RETURN_IF_ERROR(
      checkAll(op, {{&lhs, "lhs"}, {&rhs, "rhs"}, {&out, "output"}}));
  SMP_RETURN_IF_ERROR(checkDType(op, "rhs", rhs, lhs.dtype));
  SMP_RETURN_IF_ERROR(
      checkDType(op, "output", out, boolOutput ? DType::Bool : lhs.dtype));
  if (!broadcastShapes(lhs.shape, rhs.shape, shape))
    return fail(op, "cannot broadcast " + smp::base::describe(lhs) + " with " +
                        smp::base::describe(rhs));
  SMP_RETURN_IF_ERROR(checkShape(op, "output", out, shape));
  broadcastStrides(lhs.shape, shape, sa);
  broadcastStrides(rhs.shape, shape, sb);
  return Status::success();
}

Status checkWhere(const TensorRef &cond, const TensorRef &lhs,
                  const TensorRef &rhs, const TensorRef &out,
                  std::vector<int64_t> &shape, std::vector<int64_t> &sc,
                  std::vector<int64_t> &sa, std::vector<int64_t> &sb) {
  const char *op = "where";
  SMP_RETURN_IF_ERROR(checkAll(
      op,
      {{&cond, "condition"}, {&lhs, "lhs"}, {&rhs, "rhs"}, {&out, "output"}}));
  SMP_RETURN_IF_ERROR(checkDType(op, "condition", cond, DType::Bool));
  SMP_RETURN_IF_ERROR(checkDType(op, "rhs", rhs, lhs.dtype));
  SMP_RETURN_IF_ERROR(checkDType(op, "output", out, lhs.dtype));
  std::vector<int64_t> ab;
  if (!broadcastShapes(lhs.shape, rhs.shape, ab) ||
      !broadcastShapes(cond.shape, ab, shape))
    return fail(op, "cannot broadcast " + smp::base::describe(cond) + ", " +
                        smp::base::describe(lhs) + " and " +
                        smp::base::describe(rhs));
  SMP_RETURN_IF_ERROR(checkShape(op, "output", out, shape));
  broadcastStrides(cond.shape, shape, sc);
  broadcastStrides(lhs.shape, shape, sa);
  broadcastStrides(rhs.shape, shape, sb);
  return Status::success();
}

Status checkCast(const TensorRef &in, const TensorRef &out) {
  SMP_RETURN_IF_ERROR(checkTensor("cast", "input", in));
  SMP_RETURN_IF_ERROR(checkTensor("cast", "output", out));
  return checkShape("cast", "output", out, in.shape);
}

Status checkCastMulti(const std::vector<TensorRef> &in,
                      const std::vector<TensorRef> &out) {
  const char *op = "cast_multi";
  if (in.size() != out.size())
    return fail(op, std::to_string(in.size()) + " inputs but " +
                        std::to_string(out.size()) + " outputs");
  for (size_t i = 0; i < in.size(); ++i) {
    std::string input = "input #" + std::to_string(i);
    std::string output = "output #" + std::to_string(i);
    SMP_RETURN_IF_ERROR(checkTensor(op, input.c_str(), in[i]));
    SMP_RETURN_IF_ERROR(checkTensor(op, output.c_str(), out[i]));
    SMP_RETURN_IF_ERROR(checkShape(op, output.c_str(), out[i], in[i].shape));
  }
  return Status::success();
}

Status checkAddMulti(const std::vector<TensorRef> &lhs,
                     const std::vector<TensorRef> &rhs,
                     const std::vector<TensorRef> &out) {
  const char *op = "add_multi";
  if (lhs.size() != out.size() || rhs.size() != out.size())
    return fail(op, std::to_string(lhs.size()) + " lhs, " +
                        std::to_string(rhs.size()) + " rhs but " +
                        std::to_string(out.size()) + " outputs");
  for (size_t i = 0; i < out.size(); ++i) {
    std::string k = " #" + std::to_string(i);
    std::string output = "output" + k, l = "lhs" + k, r = "rhs" + k;
    SMP_RETURN_IF_ERROR(checkTensor(op, output.c_str(), out[i]));
    SMP_RETURN_IF_ERROR(checkDType(op, output.c_str(), out[i], DType::F32));
    for (auto [t, name] : {std::pair{&lhs[i], &l}, std::pair{&rhs[i], &r}}) {
      SMP_RETURN_IF_ERROR(checkTensor(op, name->c_str(), *t));
      if (t->dtype != DType::F32 && t->dtype != DType::F16 &&
          t->dtype != DType::BF16)
        return fail(op, *name + " is " + smp::base::describe(*t) +
                            ", not f32, f16 or bf16");
      SMP_RETURN_IF_ERROR(checkShape(op, name->c_str(), *t, out[i].shape));
    }
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

Status checkMatMulOperands(const TensorRef &lhs, const TensorRef &rhs,
                           const TensorRef &out) {
  const char *op = "matmul";
  SMP_RETURN_IF_ERROR(
      checkAll(op, {{&lhs, "lhs"}, {&rhs, "rhs"}, {&out, "output"}}));
  SMP_RETURN_IF_ERROR(checkDType(op, "rhs", rhs, lhs.dtype));
  SMP_RETURN_IF_ERROR(checkDType(op, "output", out, lhs.dtype));
  if (lhs.rank() == 0 || rhs.rank() == 0)
    return fail(op, "operands must not be scalars");
  return Status::success();
}

Status checkSumSquares(const std::vector<TensorRef> &inputs,
                       const TensorRef &out) {
  const char *op = "sum_squares";
  if (inputs.empty())
    return fail(op, "needs at least one input");
  SMP_RETURN_IF_ERROR(checkAll(op, {{&out, "output"}}));
  SMP_RETURN_IF_ERROR(checkDType(op, "output", out, DType::F32));
  if (out.numel() != 1)
    return fail(op, "output " + smp::base::describe(out) +
                        " must hold one element");
  for (const TensorRef &t : inputs) {
    SMP_RETURN_IF_ERROR(checkAll(op, {{&t, "input"}}));
    if (t.dtype != DType::F32 && t.dtype != DType::F16 &&
        t.dtype != DType::BF16)
      return fail(op, "input " + smp::base::describe(t) +
                          " must be f32, f16 or bf16");
  }
  return Status::success();
}

Status checkMatMulBias(const TensorRef &rhs, const TensorRef &bias,
                       const TensorRef &out, const char *op) {
  SMP_RETURN_IF_ERROR(checkAll(op, {{&bias, "bias"}}));
  SMP_RETURN_IF_ERROR(checkDType(op, "bias", bias, out.dtype));
  if (!smp::base::isFloat(out.dtype))
    return fail(op, std::string("needs float operands, not ") +
                        smp::base::dtypeName(out.dtype));
  if (rhs.rank() < 2)
    return fail(op, "needs a rhs of rank 2 or more");
  if (bias.rank() == 0 || out.rank() == 0 ||
      bias.shape.back() != out.shape.back() ||
      bias.numel() != out.shape.back())
    return fail(op, "bias " + smp::base::describe(bias) +
                        " must have one element per column of the output " +
                        smp::base::describe(out));
  return Status::success();
}

Status checkMatMulAdd(const TensorRef &addend, const TensorRef &out,
                      const char *op) {
  if (!smp::base::isFloat(out.dtype))
    return fail(op, std::string("needs float operands, not ") +
                        smp::base::dtypeName(out.dtype));
  SMP_RETURN_IF_ERROR(checkAll(op, {{&addend, "addend"}}));
  SMP_RETURN_IF_ERROR(checkDType(op, "addend", addend, out.dtype));
  return checkShape(op, "addend", addend, out.shape);
}

Status checkMatMulBiasAdd(const TensorRef &rhs, const TensorRef &bias,
                          const TensorRef &addend, const TensorRef &out) {
  const char *op = "matmul_bias_add";
  SMP_RETURN_IF_ERROR(checkMatMulBias(rhs, bias, out, op));
  return checkMatMulAdd(addend, out, op);
}

Status checkGeluEpilogue(const char *op, const TensorRef &lhs,
                         const TensorRef &rhs, const TensorRef &out,
                         const TensorRef &other, const TensorRef &bias) {
  SMP_RETURN_IF_ERROR(checkMatMulOperands(lhs, rhs, out));
  SMP_RETURN_IF_ERROR(
      checkAll(op, {{&other, "preactivation"}, {&bias, "bias"}}));
  if (lhs.dtype != DType::F16 && lhs.dtype != DType::BF16)
    return fail(op, std::string("takes f16 or bf16 operands, not ") +
                        smp::base::dtypeName(lhs.dtype));
  SMP_RETURN_IF_ERROR(checkDType(op, "rhs", rhs, lhs.dtype));
  SMP_RETURN_IF_ERROR(checkDType(op, "output", out, lhs.dtype));
  SMP_RETURN_IF_ERROR(checkDType(op, "preactivation", other, lhs.dtype));
  if (other.shape != out.shape)
    return fail(op, "preactivation " + smp::base::describe(other) +
                        " must have the output's shape " +
                        smp::base::describe(out));
  return checkMatMulBias(rhs, bias, out, op);
}

Status checkMatMulBiasGrad(const TensorRef &lhs, const TensorRef &rhs,
                           const TensorRef &out, const TensorRef &dbias) {
  const char *op = "matmul_bias_grad";
  SMP_RETURN_IF_ERROR(checkMatMulOperands(lhs, rhs, out));
  SMP_RETURN_IF_ERROR(checkAll(op, {{&dbias, "bias_grad"}}));
  if (lhs.dtype != DType::F16 && lhs.dtype != DType::BF16)
    return fail(op, std::string("takes f16 or bf16 operands, not ") +
                        smp::base::dtypeName(lhs.dtype));
  SMP_RETURN_IF_ERROR(checkDType(op, "bias_grad", dbias, lhs.dtype));
  if (lhs.rank() != 2 || rhs.rank() != 2 || lhs.shape[0] != rhs.shape[0])
    return fail(op, "needs lhs [M, N] and rhs [M, K], not " +
                        smp::base::describe(lhs) + " and " +
                        smp::base::describe(rhs));
  if (dbias.numel() != lhs.shape[1] || dbias.rank() == 0 ||
      dbias.shape.back() != lhs.shape[1])
    return fail(op, "bias_grad " + smp::base::describe(dbias) +
                        " must have one element per column of lhs " +
                        smp::base::describe(lhs));
  return Status::success();
}

BiasSums biasSums(const TensorRef &x, const TensorRef &dbias) {
  BiasSums b;
  for (int64_t d = 0; d + 1 < x.rank(); ++d)
    b.axes.push_back(d);
  b.sums = dbias;
  b.sums.shape = std::vector<int64_t>(x.shape.size(), 1);
  b.sums.shape.back() = x.shape.back();
  return b;
}

Status matmulShape(const TensorRef &lhs, const TensorRef &rhs,
                   const TensorRef &out, bool transposeLhs, bool transposeRhs,
                   MatMulShape &g) {
  const char *op = "matmul";
  std::vector<int64_t> sa = lhs.shape, sb = rhs.shape;
  bool promoteA = sa.size() == 1, promoteB = sb.size() == 1;
  if (promoteA)
    sa.insert(sa.begin(), 1);
  if (promoteB)
    sb.push_back(1);
  g.transA = transposeLhs;
  g.transB = transposeRhs;
  g.rowsA = sa[sa.size() - 2];
  g.colsA = sa.back();
  g.rowsB = sb[sb.size() - 2];
  g.colsB = sb.back();
  g.M = g.transA ? g.colsA : g.rowsA;
  g.K = g.transA ? g.rowsA : g.colsA;
  int64_t k2 = g.transB ? g.colsB : g.rowsB;
  g.N = g.transB ? g.rowsB : g.colsB;
  if (g.K != k2)
    return fail(op, "contraction mismatch: " + smp::base::describe(lhs) +
                        " and " + smp::base::describe(rhs));
  g.batchA.assign(sa.begin(), sa.end() - 2);
  g.batchB.assign(sb.begin(), sb.end() - 2);
  if (!broadcastShapes(g.batchA, g.batchB, g.batch))
    return fail(op, "batch dims of " + smp::base::describe(lhs) + " and " +
                        smp::base::describe(rhs) + " do not broadcast");
  std::vector<int64_t> expected = g.batch;
  if (!promoteA)
    expected.push_back(g.M);
  if (!promoteB)
    expected.push_back(g.N);
  SMP_RETURN_IF_ERROR(checkShape(op, "output", out, expected));
  broadcastStrides(g.batchA, g.batch, g.strA);
  broadcastStrides(g.batchB, g.batch, g.strB);
  for (int64_t &s : g.strA)
    s *= g.rowsA * g.colsA;
  for (int64_t &s : g.strB)
    s *= g.rowsB * g.colsB;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Reductions, softmax
//===----------------------------------------------------------------------===//

Status checkReduce(const char *op, const TensorRef &in,
                   const std::vector<int64_t> &axes, const TensorRef &out,
                   std::vector<bool> &reduced) {
  SMP_RETURN_IF_ERROR(checkPair(op, in, out));
  int64_t rank = in.rank();
  reduced.assign(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    int64_t d = normAxis(a, rank);
    if (d < 0 || reduced[d])
      return fail(op,
                  "axis " + std::to_string(a) +
                      (d < 0 ? " out of range for rank " + std::to_string(rank)
                             : std::string(" repeated")));
    reduced[d] = true;
  }
  std::vector<int64_t> kept, keptDims;
  for (int64_t d = 0; d < rank; ++d) {
    keptDims.push_back(reduced[d] ? 1 : in.shape[d]);
    if (!reduced[d])
      kept.push_back(in.shape[d]);
  }
  if (out.shape != kept && out.shape != keptDims)
    return fail(op, "output has shape " + shapeStr(out.shape) + ", expected " +
                        shapeStr(kept) + " (or " + shapeStr(keptDims) +
                        " with keepdims)");
  return Status::success();
}

std::vector<DimGroup> reduceGroups(const std::vector<int64_t> &shape,
                                   const std::vector<bool> &reduced) {
  std::vector<int64_t> strides = contiguousStrides(shape);
  std::vector<DimGroup> groups;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!groups.empty() && groups.back().reduced == reduced[d]) {
      groups.back().size *= shape[d];
      groups.back().stride = strides[d];
    } else {
      groups.push_back({shape[d], strides[d], reduced[d]});
    }
  }
  return groups;
}

Status checkAxis(const char *op, int64_t axis, int64_t rank, int64_t &a) {
  a = normAxis(axis, rank);
  if (a < 0)
    return fail(op, "axis " + std::to_string(axis) + " out of range for rank " +
                        std::to_string(rank));
  return Status::success();
}

namespace {
/// checkAxis, then `shape` split at the axis.
Status splitAtAxis(const char *op, const std::vector<int64_t> &shape,
                   int64_t axis, AxisSplit &s) {
  SMP_RETURN_IF_ERROR(
      checkAxis(op, axis, static_cast<int64_t>(shape.size()), s.axis));
  s.outer = product(shape, 0, s.axis);
  s.len = shape[s.axis];
  s.inner = product(shape, s.axis + 1);
  return Status::success();
}
} // namespace

Status checkCumSum(const TensorRef &in, int64_t axis, const TensorRef &out,
                   AxisSplit &s) {
  const char *op = "cumsum";
  SMP_RETURN_IF_ERROR(checkSameTensor(op, in, out));
  if (in.dtype == DType::Bool)
    return fail(op, "input " + smp::base::describe(in) +
                        " must hold integers or floats");
  if (in.rank() < 1)
    return fail(op, "input " + smp::base::describe(in) + " needs a dim");
  return splitAtAxis(op, in.shape, axis, s);
}

Status checkSoftmax(const char *op, const TensorRef &in, int64_t axis,
                    const TensorRef &out, AxisSplit &s) {
  SMP_RETURN_IF_ERROR(checkSameTensor(op, in, out));
  s = AxisSplit();
  return in.rank() == 0 ? Status::success()
                        : splitAtAxis(op, in.shape, axis, s);
}

//===----------------------------------------------------------------------===//
// Normalisation, losses
//===----------------------------------------------------------------------===//

Status checkParam(const char *op, const char *what, const TensorRef &p,
                  const std::vector<int64_t> &target) {
  SMP_RETURN_IF_ERROR(checkFloat(op, what, p));
  std::vector<int64_t> strides;
  if (!broadcastStrides(p.shape, target, strides))
    return fail(op, std::string(what) + " " + smp::base::describe(p) +
                        " does not broadcast onto " + shapeStr(target));
  return Status::success();
}

Status checkLayerNorm(const TensorRef &in, const TensorRef &scale,
                      const TensorRef *bias, int64_t axis, const TensorRef &out,
                      std::vector<int64_t> &normShape) {
  const char *op = "layer_norm";
  SMP_RETURN_IF_ERROR(checkSameTensor(op, in, out));
  int64_t a = normAxis(axis, in.rank());
  if (a < 0)
    return fail(op, "axis " + std::to_string(axis) + " out of range for " +
                        smp::base::describe(in));
  normShape.assign(in.shape.begin() + a, in.shape.end());
  SMP_RETURN_IF_ERROR(checkParam(op, "scale", scale, normShape));
  if (bias)
    SMP_RETURN_IF_ERROR(checkParam(op, "bias", *bias, normShape));
  return Status::success();
}

Status checkRmsNorm(const TensorRef &in, const TensorRef &scale,
                    const TensorRef &out, std::vector<int64_t> &normShape) {
  const char *op = "rms_norm";
  SMP_RETURN_IF_ERROR(checkSameTensor(op, in, out));
  if (in.rank() == 0)
    return fail(op, "input must not be a scalar");
  normShape.assign(1, in.shape.back());
  return checkParam(op, "scale", scale, normShape);
}

Status checkBatchNorm(const TensorRef &in, const TensorRef &scale,
                      const TensorRef &bias, const TensorRef &mean,
                      const TensorRef &variance, const TensorRef &out) {
  const char *op = "batch_norm";
  SMP_RETURN_IF_ERROR(checkSameTensor(op, in, out));
  if (in.rank() < 2)
    return fail(op,
                "input " + smp::base::describe(in) + " needs a channel dim");
  int64_t channels = in.shape[1];
  for (auto [p, what] :
       {std::pair<const TensorRef *, const char *>{&scale, "scale"},
        {&bias, "bias"},
        {&mean, "mean"},
        {&variance, "variance"}}) {
    SMP_RETURN_IF_ERROR(checkFloat(op, what, *p));
    SMP_RETURN_IF_ERROR(checkShape(op, what, *p, {channels}));
  }
  return Status::success();
}

Status checkLabelsOfLogits(const char *op, const TensorRef &logits,
                           const TensorRef &labels) {
  if (logits.rank() < 1 ||
      std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1) !=
          labels.shape)
    return fail(op, "labels " + smp::base::describe(labels) +
                        " must have the shape of logits " +
                        smp::base::describe(logits) + " without its last dim");
  return Status::success();
}

Status checkCrossEntropy(const TensorRef &logits, const TensorRef &labels,
                         bool reduced, const TensorRef &out,
                         const TensorRef *weights, int64_t requested,
                         int64_t &classes, int64_t &stride) {
  const char *op = "cross_entropy";
  SMP_RETURN_IF_ERROR(checkAll(
      op, {{&logits, "logits"}, {&labels, "labels"}, {&out, "output"}}));
  if (!smp::base::isFloat(logits.dtype))
    return unsupported(op, logits.dtype);
  if (smp::base::isFloat(labels.dtype))
    return fail(op,
                "labels must be integers, got " + smp::base::describe(labels));
  // The loss of f16/bf16 logits may be f32 (smp-fuse-loss-casts).
  bool wideLoss = out.dtype == DType::F32 &&
                  (logits.dtype == DType::F16 || logits.dtype == DType::BF16);
  if (!wideLoss)
    SMP_RETURN_IF_ERROR(checkDType(op, "output", out, logits.dtype));
  SMP_RETURN_IF_ERROR(checkLabelsOfLogits(op, logits, labels));
  if (!reduced) {
    SMP_RETURN_IF_ERROR(checkShape(op, "output", out, labels.shape));
  } else if (out.numel() != 1) {
    return fail(op, "output " + smp::base::describe(out) +
                        " must hold one element for a reduced loss");
  }
  stride = logits.shape.back();
  SMP_RETURN_IF_ERROR(crossEntropyClasses(op, requested, stride, classes));
  if (weights) {
    SMP_RETURN_IF_ERROR(checkTensor(op, "weights", *weights));
    if (!smp::base::isFloat(weights->dtype) || weights->rank() != 1 ||
        weights->shape[0] != classes)
      return fail(op, "weights " + smp::base::describe(*weights) +
                          " must be a float vector of the " +
                          std::to_string(classes) + " classes");
  }
  return Status::success();
}

} // namespace smp::kernels::common
