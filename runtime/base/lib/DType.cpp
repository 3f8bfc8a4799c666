//===- DType.cpp - Element types and fp16/bf16 conversions ----------------===//

#include "smp/base/DType.h"

#include <cmath>
#include <cstring>

namespace smp::base {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::U16:
    return 2;
  case DType::Bool:
  case DType::I8:
  case DType::U8:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::Bool:
    return "bool";
  case DType::I8:
    return "i8";
  case DType::I16:
    return "i16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::U8:
    return "u8";
  case DType::U16:
    return "u16";
  case DType::U32:
    return "u32";
  case DType::U64:
    return "u64";
  }
  return "?";
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 ||
         t == DType::BF16;
}

bool isInteger(DType t) { return !isFloat(t) && t != DType::Bool; }

bool isSignedInteger(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 ||
         t == DType::I64;
}
namespace {
uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
} // namespace

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in fp32.
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) // inf / NaN (payload kept)
    return floatOf(sign | 0x7f800000u | (mant << 13));
  return floatOf(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t floatToHalf(float f) {
  // Round to nearest even (after F. Giesen's float_to_half_fast3_rtne).
  uint32_t x = bitsOf(f);
  uint32_t sign = x & 0x80000000u;
  x ^= sign;
  uint16_t o;
  if (x >= (143u << 23)) { // >= 2^16 (or inf / NaN): inf, or a quiet NaN
    o = x > 0x7f800000u ? 0x7e00 : 0x7c00;
  } else if (x < (113u << 23)) { // below 2^-14: subnormal half or zero
    const uint32_t magic = ((127 - 15) + (23 - 10) + 1) << 23;
    float g = floatOf(x) + floatOf(magic); // the FPU rounds (to even)
    o = static_cast<uint16_t>(bitsOf(g) - magic);
  } else {
    uint32_t mantOdd = (x >> 13) & 1u;
    x += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;
    x += mantOdd;
    o = static_cast<uint16_t>(x >> 13); // a carry out of 65504 gives inf
  }
  return static_cast<uint16_t>(o | (sign >> 16));
}

float bf16ToFloat(uint16_t b) {
  return floatOf(static_cast<uint32_t>(b) << 16);
}

uint16_t floatToBf16(float f) {
  uint32_t x = bitsOf(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) // NaN: keep sign, make it quiet
    return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

} // namespace smp::base
