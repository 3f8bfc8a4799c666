//===- DType.h - Element types and fp16/bf16 conversions --------*- C++ -*-===//
//
// Part of smp_base (no MLIR, nothing of the runtime or the kernels). The
// numeric values of DType are stored in artifacts and checkpoints.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_DTYPE_H
#define SMP_BASE_DTYPE_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

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
/// Whether values of `from` stand for an input of `to` by rounding each to
/// nearest even, as torch's `x.to(torch.bfloat16)` does: f32 data for a bf16
/// or f16 input (numpy has no bf16 dtype, so a model exported in bf16 could
/// not be fed otherwise).
bool roundsTo(DType from, DType to);
/// What a roundsTo() conversion says, naming `what` (a file and input):
/// "WHAT: float32 values are rounded to bf16 (as PyTorch's
/// x.to(torch.bfloat16) does)".
std::string roundingNote(const std::string &what, DType to);
/// Writes `n` values of `from` as `to`: a roundsTo() pair, or bf16/f16
/// widened to f32 (exact).
void convertFloats(const void *src, DType from, void *dst, DType to, int64_t n);

// fp16 / bf16 <-> fp32 conversions (round to nearest even). Inline: the
// CPU kernels convert every element of an f16/bf16 tensor, and a call per
// element kept their loops from vectorising (bf16 dropout took twice f32's
// time).
namespace fpbits {
inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
} // namespace fpbits

inline float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in fp32.
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) // inf / NaN (payload kept)
    return fpbits::floatOf(sign | 0x7f800000u | (mant << 13));
  return fpbits::floatOf(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t floatToHalf(float f) {
  // Round to nearest even (after F. Giesen's float_to_half_fast3_rtne).
  uint32_t x = fpbits::bitsOf(f);
  uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint16_t o;
  if (x >= (143u << 23)) { // >= 2^16 (or inf / NaN): inf, or a quiet NaN
    o = x > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (x < (113u << 23)) { // below 2^-14: subnormal half or zero
    const uint32_t magic = ((127 - 15) + (23 - 10) + 1) << 23;
    float g = fpbits::floatOf(x) + fpbits::floatOf(magic); // rounds to even
    o = static_cast<uint16_t>(fpbits::bitsOf(g) - magic);
  } else {
    uint32_t mantOdd = (x >> 13) & 1u;
    x += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
    x += mantOdd;
    o = static_cast<uint16_t>(x >> 13); // a carry out of 65504 gives inf
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

inline float bf16ToFloat(uint16_t b) {
  return fpbits::floatOf(static_cast<uint32_t>(b) << 16);
}

inline uint16_t floatToBf16(float f) {
  uint32_t x = fpbits::bitsOf(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign, make it quiet
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

} // namespace smp::base

#endif // SMP_BASE_DTYPE_H
