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

bool roundsTo(DType from, DType to) {
  return from == DType::F32 && (to == DType::BF16 || to == DType::F16);
}

std::string roundingNote(const std::string &what, DType to) {
  return what + ": float32 values are rounded to " + dtypeName(to) +
         " as they are fed (as PyTorch's x.to(" +
         (to == DType::BF16 ? "torch.bfloat16" : "torch.float16") + ") does)";
}

void convertFloats(const void *src, DType from, void *dst, DType to,
                   int64_t n) {
  const auto *in = static_cast<const char *>(src);
  auto *out = static_cast<char *>(dst);
  for (int64_t i = 0; i < n; ++i) {
    float f;
    uint16_t h;
    if (from == DType::F32) {
      std::memcpy(&f, in + 4 * i, 4);
      h = to == DType::BF16 ? floatToBf16(f) : floatToHalf(f);
      std::memcpy(out + 2 * i, &h, 2);
    } else {
      std::memcpy(&h, in + 2 * i, 2);
      f = from == DType::BF16 ? bf16ToFloat(h) : halfToFloat(h);
      std::memcpy(out + 4 * i, &f, 4);
    }
  }
}
} // namespace smp::base
