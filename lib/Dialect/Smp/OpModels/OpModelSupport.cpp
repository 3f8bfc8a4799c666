//===- OpModelSupport.cpp - Building blocks of the op models --------------===//

#include "OpModelSupport.h"

using namespace mlir;

namespace smp {

double numel(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? static_cast<double>(t.getNumElements()) : 0;
}

OpCost streaming(Operation *op, double perElement) {
  OpCost c;
  for (Value v : op->getOperands())
    c.bytesRead += tensorBytes(v);
  for (Value v : op->getResults()) {
    c.bytesWritten += tensorBytes(v);
    c.flops += perElement * numel(v);
  }
  return c;
}

} // namespace smp
