//===- OpCosts.h - An op's cost through CostOpInterface ---------*- C++ -*-===//

#ifndef SMP_ANALYSIS_COST_OPCOSTS_H
#define SMP_ANALYSIS_COST_OPCOSTS_H

#include "smp/Interfaces/CostInterface.h"

namespace mlir {
class Operation;
class Value;
} // namespace mlir

namespace smp {

/// The op's cost through CostOpInterface (whose models live with the op
/// families, smp/Dialect/Smp/OpModels/OpModels.h); ops without it
/// (func.return, ...) cost nothing.
OpCost costOf(mlir::Operation *op);

/// Bytes of a statically shaped tensor value (0 otherwise).
double tensorBytes(mlir::Value v);

} // namespace smp

#endif // SMP_ANALYSIS_COST_OPCOSTS_H
