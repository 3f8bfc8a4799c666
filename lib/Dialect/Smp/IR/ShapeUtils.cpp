//===- ShapeUtils.cpp - Shape arithmetic shared by ops and frontends ------===//

#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Support/CheckedMath.h"
#include "smp/base/Shape.h"

#include <string>

namespace smp {

std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  llvm::SmallVector<int64_t> out;
  if (!smp::base::broadcastShapes(a, b, out))
    return std::nullopt;
  return out;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::optional<int64_t> checkedNumElements(llvm::ArrayRef<int64_t> shape) {
  return checkedElementCount(shape);
}

std::optional<int64_t> windowOutputSize(int64_t in, int64_t kernel,
                                        int64_t stride, int64_t padBegin,
                                        int64_t padEnd, int64_t dilation,
                                        bool ceilMode) {
  if (kernel <= 0 || stride <= 0 || dilation <= 0 || padBegin < 0 ||
      padEnd < 0 || in < 0)
    return std::nullopt;
  // Every step checked: pads or dilations near INT64_MAX wrapped into a
  // small, wrong output size.
  auto effective = checkedMul(dilation, kernel - 1);
  auto padded = checkedAdd(in, padBegin);
  if (!effective || !padded)
    return std::nullopt;
  auto total = checkedAdd(*padded, padEnd);
  auto window = checkedAdd(*effective, 1);
  if (!total || !window)
    return std::nullopt;
  int64_t span = *total - *window;
  if (span < 0)
    return std::nullopt;
  int64_t out = span / stride + 1;
  if (ceilMode && span % stride != 0)
    ++out;
  // ONNX/PyTorch: with ceil mode the last window must start inside the input
  // or the begin padding.
  if (ceilMode) {
    auto lastStart = checkedMul(out - 1, stride);
    if (!lastStart || *lastStart >= *padded)
      --out;
  }
  return out;
}

bool isRowVector(llvm::ArrayRef<int64_t> shape, int64_t n, int64_t maxRank) {
  return !shape.empty() && static_cast<int64_t>(shape.size()) <= maxRank &&
         shape.back() == n &&
         llvm::all_of(shape.drop_back(), [](int64_t d) { return d == 1; });
}

int64_t sliceLength(int64_t start, int64_t limit, int64_t step) {
  // In unsigned arithmetic: a step of INT64_MIN cannot be negated, and
  // limit - start + step - 1 overflowed for large steps.
  if (step > 0)
    return limit > start ? int64_t(uint64_t(limit - start - 1) /
                                   uint64_t(step)) +
                               1
                         : 0;
  uint64_t magnitude = uint64_t(-(step + 1)) + 1;
  return start > limit ? int64_t(uint64_t(start - limit - 1) / magnitude) + 1
                       : 0;
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
