//===- SmpDialect.h - smp dialect -------------------------------*- C++ -*-===//
//
// Declares the smp dialect, its enums and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SMPDIALECT_H
#define SMP_DIALECT_SMP_IR_SMPDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "smp/Dialect/Smp/IR/SmpDialect.h.inc"
#include "smp/Dialect/Smp/IR/SmpEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "smp/Dialect/Smp/IR/SmpAttrs.h.inc"

#endif // SMP_DIALECT_SMP_IR_SMPDIALECT_H
