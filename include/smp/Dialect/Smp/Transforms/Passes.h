//===- Passes.h - smp dialect passes ----------------------------*- C++ -*-===//

#ifndef SMP_DIALECT_SMP_TRANSFORMS_PASSES_H
#define SMP_DIALECT_SMP_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Pass/Pass.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"

namespace smp {

#define GEN_PASS_DECL
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"

} // namespace smp

#endif // SMP_DIALECT_SMP_TRANSFORMS_PASSES_H
