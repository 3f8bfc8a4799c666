//===- Checks.h - Shared host-side kernel helpers ---------------*- C++ -*-===//
//
// The "op: message" failures, the tensor/dtype/shape checks, broadcasting,
// axis normalisation and dim merging that kernels/cpu and kernels/cuda both
// run on the host before any work, so that both report the same messages.
// Plain C++17 (no CUDA, no OpenMP); nvcc includes it from kernels/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_KERNELS_COMMON_CHECKS_H
#define SMP_KERNELS_COMMON_CHECKS_H

#include "smp/base/Shape.h"
#include "smp/base/Tensor.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace smp::kernels::common {

using smp::base::DType;
using smp::base::Status;
using smp::base::TensorRef;

//===----------------------------------------------------------------------===//
// Failures and tensor checks
//===----------------------------------------------------------------------===//

/// Status::failure("op: msg").
Status fail(const char *op, const std::string &msg);
/// "op: unsupported element type <t>".
Status unsupported(const char *op, DType t);
/// "[2, 3]" ("[]" for a scalar).
std::string shapeStr(const std::vector<int64_t> &shape);

/// Fails unless t has data (or no elements), non-negative dims and a valid
/// dtype.
Status checkTensor(const char *op, const char *what, const TensorRef &t);
Status checkDType(const char *op, const char *what, const TensorRef &t,
                  DType expected);
/// checkTensor(op, "indices", indices), and an integer dtype.
Status checkIndices(const char *op, const TensorRef &indices);
Status checkShape(const char *op, const char *what, const TensorRef &t,
                  const std::vector<int64_t> &expected);
/// checkTensor, then unsupported unless t is a float tensor.
Status checkFloat(const char *op, const char *what, const TensorRef &t);
/// checkFloat(op, "operand", t) on each of ts, in order.
Status checkFloats(const char *op, std::initializer_list<const TensorRef *> ts);
/// "op: <a> and <b> must have the same shape" unless they do.
Status checkSameShape(const char *op, const TensorRef &a, const TensorRef &b);

/// Input and output valid, output of the input's dtype (data movement).
Status checkPair(const char *op, const TensorRef &in, const TensorRef &out);
/// checkPair, and the output has the input's shape (unary ops, norms).
Status checkSameTensor(const char *op, const TensorRef &in,
                       const TensorRef &out);

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

/// Normalises axis into [0, rank); -1 when out of range.
int64_t normAxis(int64_t axis, int64_t rank);

/// Row-major element strides (smp_base).
using smp::base::contiguousStrides;

/// Element strides of `in` broadcast (right-aligned) onto `outShape`, 0 on
/// broadcast dims; false when the shapes do not broadcast that way.
bool broadcastStrides(const std::vector<int64_t> &in,
                      const std::vector<int64_t> &outShape,
                      std::vector<int64_t> &strides);

/// Numpy broadcast of a and b into out; false when incompatible.
using smp::base::broadcastShapes;

/// Product of shape[from, to).
int64_t product(const std::vector<int64_t> &shape, size_t from = 0,
                size_t to = SIZE_MAX);

/// A contiguous output of `outShape` read through N operands with element
/// `strides` (any sign, 0 for broadcast dims): drops its size-1 dims and
/// merges neighbouring dims that every operand walks as one, into `shape`
/// and `merged` (at least one dim: [1] with strides 0 for a scalar).
template <size_t N>
void mergeDims(const std::vector<int64_t> &outShape,
               const std::array<std::vector<int64_t>, N> &strides,
               std::vector<int64_t> &shape,
               std::array<std::vector<int64_t>, N> &merged) {
  shape.clear();
  for (size_t k = 0; k < N; ++k)
    merged[k].clear();
  for (size_t d = 0; d < outShape.size(); ++d) {
    if (outShape[d] == 1)
      continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = merged[k].back() == strides[k][d] * outShape[d];
    if (merge) {
      shape.back() *= outShape[d];
      for (size_t k = 0; k < N; ++k)
        merged[k].back() = strides[k][d];
      continue;
    }
    shape.push_back(outShape[d]);
    for (size_t k = 0; k < N; ++k)
      merged[k].push_back(strides[k][d]);
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (size_t k = 0; k < N; ++k)
      merged[k].push_back(0);
  }
}

//===----------------------------------------------------------------------===//
// Op names (the enums stay per library; both number them alike)
//===----------------------------------------------------------------------===//

/// The name of UnaryOp number `op` ("neg", ..., "gelu_tanh"; "unary" when
/// out of range).
const char *unaryOpName(unsigned op);
/// The name of BinaryOp number `op` ("add", ..., "or"; "binary").
const char *binaryOpName(unsigned op);
/// The name of ReduceOp number `op` ("reduce_sum", "reduce_mean",
/// "reduce_max"; "reduce").
const char *reduceOpName(unsigned op);

} // namespace smp::kernels::common

#endif // SMP_KERNELS_COMMON_CHECKS_H
