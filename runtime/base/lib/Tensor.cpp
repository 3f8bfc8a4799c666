//===- Tensor.cpp - Tensor views ------------------------------------------===//

#include "smp/base/Tensor.h"

#include <cmath>
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

namespace {

/// Element k of a float tensor: 0 finite (or not a float dtype), 1
/// infinite, 2 NaN (the half types widen keeping both).
int classify(const TensorRef &t, int64_t k) {
  if (!isFloat(t.dtype))
    return 0;
  double v = elementAsDouble(t, k);
  return std::isnan(v) ? 2 : std::isinf(v) ? 1 : 0;
}

} // namespace

bool nonFinite(const TensorRef &t, int64_t k) { return classify(t, k) != 0; }

NonFiniteScan scanNonFinite(const TensorRef &t) {
  NonFiniteScan scan;
  if (!isFloat(t.dtype))
    return scan;
  for (int64_t k = 0, n = t.numel(); k < n; ++k) {
    int c = classify(t, k);
    if (c == 2 && scan.nans++ == 0)
      scan.firstNan = k;
    if (c == 1 && scan.infs++ == 0)
      scan.firstInf = k;
  }
  return scan;
}

std::string indexString(const std::vector<int64_t> &shape, int64_t k) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    int64_t extent = shape[d] > 0 ? shape[d] : 1;
    index[d] = k % extent;
    k /= extent;
  }
  std::string s = "[";
  for (size_t d = 0; d < index.size(); ++d)
    s += (d ? ", " : "") + std::to_string(index[d]);
  return s + "]";
}

} // namespace smp::base
