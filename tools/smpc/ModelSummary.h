//===- ModelSummary.h - Human-readable summary of an smp module -*- C++ -*-===//

#ifndef SMP_TOOLS_SMPC_MODELSUMMARY_H
#define SMP_TOOLS_SMPC_MODELSUMMARY_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace smp {
/// Prints inputs, outputs, parameter count and bytes, and an op histogram.
void printModelSummary(mlir::ModuleOp module, llvm::raw_ostream &os);
} // namespace smp

#endif // SMP_TOOLS_SMPC_MODELSUMMARY_H
