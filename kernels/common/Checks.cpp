//===- Checks.cpp - Host-side helpers shared by the kernel libraries ------===//

#include "smp/kernels/common/Checks.h"
#include "smp/kernels/Kernels.h"

#include <algorithm>

namespace smp::kernels::common {

//===----------------------------------------------------------------------===//
// Failures and tensor checks
//===----------------------------------------------------------------------===//

Status fail(const char *op, const std::string &msg) {
  return Status::failure(std::string(op) + ": " + msg);
}

Status unsupported(const char *op, DType t) {
  return Status::failure(std::string(op) + ": unsupported element type " +
                         smp::base::dtypeName(t));
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "[]";
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Status checkTensor(const char *op, const char *what, const TensorRef &t) {
  for (int64_t d : t.shape)
    if (d < 0)
      return fail(op, std::string(what) +
                          " has a negative dim: " + smp::base::describe(t));
  if (!t.data && t.numel() != 0)
    return fail(op, std::string(what) + " has no data");
  if (smp::base::dtypeSize(t.dtype) == 0)
    return fail(op, std::string(what) + " has an invalid dtype");
  return Status::success();
}

Status checkDType(const char *op, const char *what, const TensorRef &t,
                  DType expected) {
  if (t.dtype == expected)
    return Status::success();
  return fail(op, std::string(what) + " is " + smp::base::describe(t) +
                      ", expected element type " +
                      smp::base::dtypeName(expected));
}

Status checkIndices(const char *op, const TensorRef &indices) {
  SMP_RETURN_IF_ERROR(checkTensor(op, "indices", indices));
  if (!smp::base::isInteger(indices.dtype))
    return fail(op, "indices must be integers, got " +
                        smp::base::describe(indices));
  return Status::success();
}

Status checkShape(const char *op, const char *what, const TensorRef &t,
                  const std::vector<int64_t> &expected) {
  if (t.shape == expected)
    return Status::success();
  return fail(op, std::string(what) + " has shape " + shapeStr(t.shape) +
                      ", expected " + shapeStr(expected));
}

Status checkFloat(const char *op, const char *what, const TensorRef &t) {
  SMP_RETURN_IF_ERROR(checkTensor(op, what, t));
  if (!smp::base::isFloat(t.dtype))
    return unsupported(op, t.dtype);
  return Status::success();
}

Status checkFloats(const char *op,
                   std::initializer_list<const TensorRef *> ts) {
  for (const TensorRef *t : ts)
    SMP_RETURN_IF_ERROR(checkFloat(op, "operand", *t));
  return Status::success();
}

Status checkSameShape(const char *op, const TensorRef &a, const TensorRef &b) {
  if (a.shape != b.shape)
    return fail(op, smp::base::describe(a) + " and " + smp::base::describe(b) +
                        " must have the same shape");
  return Status::success();
}

Status checkPair(const char *op, const TensorRef &in, const TensorRef &out) {
  SMP_RETURN_IF_ERROR(checkTensor(op, "input", in));
  SMP_RETURN_IF_ERROR(checkTensor(op, "output", out));
  return checkDType(op, "output", out, in.dtype);
}

Status checkSameTensor(const char *op, const TensorRef &in,
                       const TensorRef &out) {
  SMP_RETURN_IF_ERROR(checkPair(op, in, out));
  return checkShape(op, "output", out, in.shape);
}

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

int64_t normAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return -1;
  return axis < 0 ? axis + rank : axis;
}

bool broadcastStrides(const std::vector<int64_t> &in,
                      const std::vector<int64_t> &outShape,
                      std::vector<int64_t> &strides) {
  if (in.size() > outShape.size())
    return false;
  size_t lead = outShape.size() - in.size();
  std::vector<int64_t> inStrides = contiguousStrides(in);
  strides.assign(outShape.size(), 0);
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == outShape[lead + d])
      strides[lead + d] = in[d] == 1 ? 0 : inStrides[d];
    else if (in[d] != 1)
      return false;
  }
  return true;
}

int64_t product(const std::vector<int64_t> &shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t d = from; d < std::min(to, shape.size()); ++d)
    n *= shape[d];
  return n;
}

//===----------------------------------------------------------------------===//
// Op names
//===----------------------------------------------------------------------===//

namespace {
template <size_t N>
const char *nameAt(const char *const (&names)[N], unsigned i,
                   const char *fallback) {
  return i < N ? names[i] : fallback;
}
} // namespace

const char *unaryOpName(unsigned op) {
  static const char *const names[] = {
      "neg",        "abs",  "exp", "log",     "sqrt",     "rsqrt",
      "reciprocal", "tanh", "erf", "sigmoid", "silu",     "relu",
      "sin",        "cos",  "not", "gelu",    "gelu_tanh"};
  return nameAt(names, op, "unary");
}

const char *binaryOpName(unsigned op) {
  static const char *const names[] = {"add",  "sub",     "mul", "div",
                                      "pow",  "max",     "min", "equal",
                                      "less", "greater", "and", "or",
                                      "mod",  "fmod"};
  return nameAt(names, op, "binary");
}

const char *reduceOpName(unsigned op) {
  static const char *const names[] = {"reduce_sum", "reduce_mean",
                                      "reduce_max"};
  return nameAt(names, op, "reduce");
}

} // namespace smp::kernels::common

namespace smp::kernels {

// common::unaryOpName / binaryOpName / reduceOpName number the ops as these
// enums do.
static_assert(static_cast<unsigned>(UnaryOp::GeluTanh) == 16 &&
              static_cast<unsigned>(BinaryOp::FMod) == 13 &&
              static_cast<unsigned>(ReduceOp::Max) == 2);

const char *unaryOpName(UnaryOp op) {
  return common::unaryOpName(static_cast<unsigned>(op));
}

const char *binaryOpName(BinaryOp op) {
  return common::binaryOpName(static_cast<unsigned>(op));
}

const char *reduceOpName(ReduceOp op) {
  return common::reduceOpName(static_cast<unsigned>(op));
}

} // namespace smp::kernels
