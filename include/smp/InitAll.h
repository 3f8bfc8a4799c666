//===- InitAll.h - Register every smp dialect and pass ----------*- C++ -*-===//

#ifndef SMP_INITALL_H
#define SMP_INITALL_H

#include "mlir/IR/DialectRegistry.h"

namespace smp {
/// Dialects smp tools understand: smp, func, and the upstream dialects our
/// pipelines produce, with the op models (gradients, costs, sharding
/// rules) of their ops.
void registerAllDialects(mlir::DialectRegistry &registry);
/// Every smp pass, plus the upstream passes useful on smp IR.
void registerAllPasses();
} // namespace smp

#endif // SMP_INITALL_H
