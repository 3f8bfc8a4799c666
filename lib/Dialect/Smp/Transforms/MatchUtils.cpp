//===- MatchUtils.cpp - Helpers for smp raising patterns ------------------===//

#include "smp/Dialect/Smp/Transforms/MatchUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <cmath>

using namespace mlir;

std::optional<double> smp::getSplatConstant(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  if (isa<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().convertToDouble();
  if (auto intType = dyn_cast<IntegerType>(attr.getElementType());
      intType && intType.getWidth() > 1)
    return static_cast<double>(attr.getSplatValue<APInt>().getSExtValue());
  return std::nullopt;
}

bool smp::isSplatConstant(Value v, double expected) {
  auto value = getSplatConstant(v);
  return value &&
         std::fabs(*value - expected) <= 1e-4 * std::max(1.0, std::fabs(expected));
}

SmallVector<Value> smp::collectMulFactors(Value root) {
  SmallVector<Value> factors, worklist{root};
  // Iterative: the depth of a product tree comes from the input graph.
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    auto mul = v.getDefiningOp<MulOp>();
    // Inner products are expanded only when nothing else uses them, so a
    // rewrite of the root leaves no dangling partial product.
    bool expandable = mul && (v == root || v.hasOneUse());
    if (!expandable) {
      factors.push_back(v);
      continue;
    }
    worklist.push_back(mul.getRhs());
    worklist.push_back(mul.getLhs());
  }
  return factors;
}

bool smp::reducesLeadingDims(llvm::ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> norm;
  for (int64_t a : axes)
    norm.push_back(a < 0 ? a + rank : a);
  llvm::sort(norm);
  if (static_cast<int64_t>(norm.size()) != rank - 1)
    return false;
  for (int64_t d = 0; d < rank - 1; ++d)
    if (norm[d] != d)
      return false;
  return true;
}
