//===- CostInterface.h - Work and traffic of an op --------------*- C++ -*-===//

#ifndef SMP_INTERFACES_COSTINTERFACE_H
#define SMP_INTERFACES_COSTINTERFACE_H

#include "mlir/IR/OpDefinition.h"

namespace smp {

/// An op's work and memory traffic (see CostOpInterface).
struct OpCost {
  double flops = 0;
  double bytesRead = 0;
  double bytesWritten = 0;
  /// The FLOPs are matrix products (tensor cores on GPUs).
  bool matrix = false;

  double bytes() const { return bytesRead + bytesWritten; }
  OpCost &operator+=(const OpCost &o) {
    flops += o.flops;
    bytesRead += o.bytesRead;
    bytesWritten += o.bytesWritten;
    return *this;
  }
};

} // namespace smp

#include "smp/Interfaces/CostInterface.h.inc"

#endif // SMP_INTERFACES_COSTINTERFACE_H
