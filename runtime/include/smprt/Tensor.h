//===- Tensor.h - Element types and tensor views for the runtime -*- C++ -*-===//
//
// The runtime and the kernels share these plain types. Nothing here depends on
// MLIR: the runtime reads a protobuf artifact written by the compiler.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TENSOR_H
#define SMPRT_TENSOR_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace smprt {

/// Element types. The numeric values are stored in artifacts: append only.
enum class DType : uint8_t {
  F32 = 0,
  F64 = 1,
  F16 = 2,
  BF16 = 3,
  Bool = 4, // one byte per element, 0 or 1
  I8 = 5,
  I16 = 6,
  I32 = 7,
  I64 = 8,
  U8 = 9,
  U16 = 10,
  U32 = 11,
  U64 = 12,
};

/// Bytes per element.
size_t dtypeSize(DType t);
/// "f32", "i64", ... (numpy-like names for messages).
const char *dtypeName(DType t);
bool isFloat(DType t);
/// I8..U64 (not Bool).
bool isInteger(DType t);
/// I8, I16, I32, I64.
bool isSignedInteger(DType t);

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
  size_t bytes() const { return static_cast<size_t>(numel()) * dtypeSize(dtype); }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Element `k` of `t` as a double (any dtype; for tools and tests, not for
/// kernels' inner loops).
double elementAsDouble(const TensorRef &t, int64_t k);

/// "2x3xf32" for messages.
std::string describe(const TensorRef &t);

/// The result of an operation that can fail on data (not on programming
/// errors): an index out of range, an integer division by zero, ...
struct Status {
  std::string error; // empty on success
  bool ok() const { return error.empty(); }
  static Status success() { return {}; }
  static Status failure(std::string msg) { return Status{std::move(msg)}; }
};

/// fp16 / bf16 <-> fp32 conversions (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

} // namespace smprt

#endif // SMPRT_TENSOR_H
