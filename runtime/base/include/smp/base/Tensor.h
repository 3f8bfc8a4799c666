//===- Tensor.h - Tensor views ----------------------------------*- C++ -*-===//
//
// The kernels, the runtime and the compiler's artifact writer share these
// plain types. Part of smp_base: nothing here depends on MLIR, the runtime
// or the kernels.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_TENSOR_H
#define SMP_BASE_TENSOR_H

#include "smp/base/DType.h"
#include "smp/base/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace smp::base {

/// A non-owning view of a dense, row-major tensor.
struct TensorRef {
  void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  size_t bytes() const {
    return static_cast<size_t>(numel()) * dtypeSize(dtype);
  }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Element `k` of `t` as a double (any dtype; for tools and tests, not for
/// kernels' inner loops).
double elementAsDouble(const TensorRef &t, int64_t k);
/// Sets element `k` of `t` from a double: rounded to nearest even for the
/// half types (through f32), C conversion for the others (callers pass
/// representable values), != 0 for bool. The inverse of elementAsDouble.
void setElementFromDouble(const TensorRef &t, int64_t k, double v);

/// "2x3xf32" for messages.
std::string describe(const TensorRef &t);

/// Whether element `k` of a float tensor is NaN or infinite (false for
/// other dtypes).
bool nonFinite(const TensorRef &t, int64_t k);

/// The NaN and infinite elements of a float tensor (none for other dtypes):
/// how many, and the first of each (-1: none).
struct NonFiniteScan {
  int64_t nans = 0, infs = 0, firstNan = -1, firstInf = -1;
};
NonFiniteScan scanNonFinite(const TensorRef &t);

/// Element `k`'s multi-index in `shape`: "[0, 3, 1]".
std::string indexString(const std::vector<int64_t> &shape, int64_t k);

} // namespace smp::base

#endif // SMP_BASE_TENSOR_H
