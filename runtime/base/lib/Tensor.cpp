//===- Tensor.cpp - Tensor views ------------------------------------------===//

#include "smp/base/Tensor.h"

#include <cstring>

namespace smp::base {

double elementAsDouble(const TensorRef &t, int64_t k) {
  const char *p = static_cast<const char *>(t.data);
  auto load = [&](auto v) {
    std::memcpy(&v, p + k * sizeof(v), sizeof(v));
    return v;
  };
  switch (t.dtype) {
  case DType::F32:
    return load(float());
  case DType::F64:
    return load(double());
  case DType::F16:
    return halfToFloat(load(uint16_t()));
  case DType::BF16:
    return bf16ToFloat(load(uint16_t()));
  case DType::Bool:
  case DType::U8:
    return load(uint8_t());
  case DType::I8:
    return load(int8_t());
  case DType::I16:
    return load(int16_t());
  case DType::U16:
    return load(uint16_t());
  case DType::I32:
    return load(int32_t());
  case DType::U32:
    return load(uint32_t());
  case DType::I64:
    return static_cast<double>(load(int64_t()));
  case DType::U64:
    return static_cast<double>(load(uint64_t()));
  }
  return 0;
}

void setElementFromDouble(const TensorRef &t, int64_t k, double v) {
  char *p = static_cast<char *>(t.data);
  auto store = [&](auto x) { std::memcpy(p + k * sizeof(x), &x, sizeof(x)); };
  switch (t.dtype) {
  case DType::F32:
    return store(static_cast<float>(v));
  case DType::F64:
    return store(v);
  case DType::F16:
    return store(floatToHalf(static_cast<float>(v)));
  case DType::BF16:
    return store(floatToBf16(static_cast<float>(v)));
  case DType::Bool:
    return store(static_cast<uint8_t>(v != 0));
  case DType::U8:
    return store(static_cast<uint8_t>(v));
  case DType::I8:
    return store(static_cast<int8_t>(v));
  case DType::I16:
    return store(static_cast<int16_t>(v));
  case DType::U16:
    return store(static_cast<uint16_t>(v));
  case DType::I32:
    return store(static_cast<int32_t>(v));
  case DType::U32:
    return store(static_cast<uint32_t>(v));
  case DType::I64:
    return store(static_cast<int64_t>(v));
  case DType::U64:
    return store(static_cast<uint64_t>(v));
  }
}

std::string describe(const TensorRef &t) {
  std::string s;
  for (int64_t d : t.shape) {
    s += std::to_string(d);
    s += 'x';
  }
  return s + dtypeName(t.dtype);
}

} // namespace smp::base
