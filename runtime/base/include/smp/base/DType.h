//===- DType.h - Element types and fp16/bf16 conversions --------*- C++ -*-===//
//
// Part of smp_base (no MLIR, nothing of the runtime or the kernels). The
// numeric values of DType are stored in artifacts and checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_DTYPE_H
#define SMP_BASE_DTYPE_H

#include <cstddef>
#include <cstdint>

namespace smp::base {

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

/// Bytes per element (0 for a value outside the enum).
size_t dtypeSize(DType t);
/// "f32", "i64", ... (numpy-like names for messages).
const char *dtypeName(DType t);
bool isFloat(DType t);
/// I8..U64 (not Bool).
bool isInteger(DType t);
/// I8, I16, I32, I64.
bool isSignedInteger(DType t);

/// fp16 / bf16 <-> fp32 conversions (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

} // namespace smp::base

#endif // SMP_BASE_DTYPE_H
