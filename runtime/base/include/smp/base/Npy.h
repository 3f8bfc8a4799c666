//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//

#ifndef SMP_BASE_NPY_H
#define SMP_BASE_NPY_H

#include "smp/base/Tensor.h"

#include <memory>
#include <string>
#include <vector>

namespace smp::base {

/// A tensor read from a .npy file: its bytes, or (readNpy with `map`) the
/// file mapped read-only with the data inside it.
struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::string bytes;                  // read: the data
  std::shared_ptr<const char> mapped; // mapped: the whole file
  const char *mappedData = nullptr;   // mapped: the data in it
  const char *data() const { return mapped ? mappedData : bytes.data(); }
  /// The data as a tensor; a mapped array's must not be written.
  TensorRef ref() { return TensorRef{const_cast<char *>(data()), dtype, shape}; }
};

/// Reads a little-endian, C-order .npy file (format 1.0/2.0/3.0). Refuses
/// Fortran order, big-endian or object dtypes, and a payload whose size does
/// not match the header. With `map`, the file is mapped instead of read
/// when its data is aligned to its element size (numpy aligns it to 64
/// bytes): a training corpus larger than memory is paged in as batches
/// touch it, and costs no copy.
Status readNpy(const std::string &path, NpyArray &out, bool map = false);

/// Writes `t` as a .npy file (format 1.0); a bf16 tensor widened to float32
/// (exact: numpy has no bf16).
Status writeNpy(const std::string &path, const TensorRef &t);

} // namespace smp::base

#endif // SMP_BASE_NPY_H
