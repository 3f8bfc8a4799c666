//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//

#ifndef SMP_BASE_NPY_H
#define SMP_BASE_NPY_H

#include "smp/base/Tensor.h"

#include <string>
#include <vector>

namespace smp::base {

/// A tensor read from a .npy file (owns its bytes).
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string bytes;
  TensorRef ref() { return TensorRef{bytes.data(), dtype, shape}; }
};

/// Reads a little-endian, C-order .npy file (format 1.0/2.0/3.0). Refuses
/// Fortran order, big-endian or object dtypes, and a payload whose size does
/// not match the header.
Status readNpy(const std::string &path, NpyArray &out);

/// Writes `t` as a .npy file (format 1.0).
Status writeNpy(const std::string &path, const TensorRef &t);

} // namespace smp::base

#endif // SMP_BASE_NPY_H
