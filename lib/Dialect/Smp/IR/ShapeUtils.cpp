//===- ShapeUtils.cpp - Shape arithmetic shared by ops and frontends ------===//

#include "smp/Dialect/Smp/IR/ShapeUtils.h"

#include <string>

namespace smp {

std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1)
      out[i] = da;
    else if (da == 1)
      out[i] = db;
    else
      return std::nullopt;
  }
  return out;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::optional<int64_t> checkedNumElements(llvm::ArrayRef<int64_t> shape) {
  constexpr int64_t kLimit = int64_t(1) << 62;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d != 0 && n > kLimit / d)
      return std::nullopt;
    n *= d;
  }
  return n;
}

std::optional<int64_t> windowOutputSize(int64_t in, int64_t kernel,
                                        int64_t stride, int64_t padBegin,
                                        int64_t padEnd, int64_t dilation,
                                        bool ceilMode) {
  if (kernel <= 0 || stride <= 0 || dilation <= 0 || padBegin < 0 ||
      padEnd < 0)
    return std::nullopt;
  int64_t effective = dilation * (kernel - 1) + 1;
  int64_t span = in + padBegin + padEnd - effective;
  if (span < 0)
    return std::nullopt;
  int64_t out = ceilMode ? (span + stride - 1) / stride + 1 : span / stride + 1;
  // ONNX/PyTorch: with ceil mode the last window must start inside the input
  // or the begin padding.
  if (ceilMode && (out - 1) * stride >= in + padBegin)
    --out;
  return out;
}

int64_t sliceLength(int64_t start, int64_t limit, int64_t step) {
  if (step > 0)
    return limit > start ? (limit - start + step - 1) / step : 0;
  return start > limit ? (start - limit + (-step) - 1) / (-step) : 0;
}

std::string shapeToString(llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += "x";
    s += std::to_string(shape[i]);
  }
  return s;
}

} // namespace smp
