//===- SmpOps.h - smp dialect operations ------------------------*- C++ -*-===//

#ifndef SMP_DIALECT_SMP_IR_SMPOPS_H
#define SMP_DIALECT_SMP_IR_SMPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpTraits.h"

#define GET_OP_CLASSES
#include "smp/Dialect/Smp/IR/SmpOps.h.inc"

namespace smp {
/// The classes of a cross-entropy's (or its gradient's) logits: `attr` or
/// the last dim; outside [1, last dim] an error at `loc` naming `op`.
mlir::LogicalResult crossEntropyClasses(std::optional<mlir::Location> loc,
                                        llvm::StringRef op,
                                        mlir::RankedTensorType logits,
                                        std::optional<int64_t> attr,
                                        int64_t &classes);
} // namespace smp

#endif // SMP_DIALECT_SMP_IR_SMPOPS_H
