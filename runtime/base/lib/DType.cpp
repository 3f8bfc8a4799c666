//===- DType.cpp - Element types and fp16/bf16 conversions ----------------===//

#include "smp/base/DType.h"

#include <cmath>
#include <cstring>
#include <iterator>

namespace smp::base {

namespace {
/// What the runtime knows of each element type, indexed by DType's value.
struct DTypeInfo {
  DType dtype;
  const char *name;
  size_t bytes;
  bool isFloat;
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "f32", 4, true},   {DType::F64, "f64", 8, true},
    {DType::F16, "f16", 2, true},   {DType::BF16, "bf16", 2, true},
    {DType::Bool, "bool", 1, false}, {DType::I8, "i8", 1, false},
    {DType::I16, "i16", 2, false},  {DType::I32, "i32", 4, false},
    {DType::I64, "i64", 8, false},  {DType::U8, "u8", 1, false},
    {DType::U16, "u16", 2, false},  {DType::U32, "u32", 4, false},
    {DType::U64, "u64", 8, false},
};

constexpr bool indexedByValue() {
  for (size_t i = 0; i < std::size(kDTypes); ++i)
    if (static_cast<size_t>(kDTypes[i].dtype) != i)
      return false;
  return true;
}
static_assert(indexedByValue(), "kDTypes[i] must describe DType value i");

/// The entry of `t`; null for a value outside the enum.
const DTypeInfo *infoOf(DType t) {
  auto i = static_cast<size_t>(t);
  return i < std::size(kDTypes) ? &kDTypes[i] : nullptr;
}
} // namespace

size_t dtypeSize(DType t) {
  const DTypeInfo *info = infoOf(t);
  return info ? info->bytes : 0;
}

const char *dtypeName(DType t) {
  const DTypeInfo *info = infoOf(t);
  return info ? info->name : "?";
}

bool isFloat(DType t) {
  const DTypeInfo *info = infoOf(t);
  return info && info->isFloat;
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
