//===- OpCosts.h - CostOpInterface for the smp dialect ----------*- C++ -*-===//

#ifndef SMP_ANALYSIS_COST_OPCOSTS_H
#define SMP_ANALYSIS_COST_OPCOSTS_H

#include "smp/Interfaces/CostInterface.h"

namespace mlir {
class DialectRegistry;
class Operation;
class Value;
} // namespace mlir

namespace smp {

/// Attaches CostOpInterface to every smp op and to the shard collectives
/// (whose transfer the cost model times separately: they cost no FLOPs).
void registerCostExternalModels(mlir::DialectRegistry &registry);

/// The op's cost through CostOpInterface; ops without it (func.return, ...)
/// cost nothing.
OpCost costOf(mlir::Operation *op);

/// Bytes of a statically shaped tensor value (0 otherwise).
double tensorBytes(mlir::Value v);

} // namespace smp

#endif // SMP_ANALYSIS_COST_OPCOSTS_H
