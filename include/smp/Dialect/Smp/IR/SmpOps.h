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

#endif // SMP_DIALECT_SMP_IR_SMPOPS_H
