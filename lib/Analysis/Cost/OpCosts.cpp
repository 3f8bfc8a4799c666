//===- OpCosts.cpp - An op's cost through CostOpInterface -----------------===//
//
// The cost of each op is its CostOpInterface model, which lives with the
// op's family in lib/Dialect/Smp/OpModels.
//
//===----------------------------------------------------------------------===//

#include "smp/Analysis/Cost/OpCosts.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"

#include <algorithm>

using namespace mlir;

namespace smp {

double tensorBytes(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return 0;
  return static_cast<double>(t.getNumElements()) *
         std::max(1u, t.getElementTypeBitWidth() / 8);
}

OpCost costOf(Operation *op) {
  if (auto iface = dyn_cast<CostOpInterface>(op))
    return iface.getCost();
  return OpCost();
}

} // namespace smp
