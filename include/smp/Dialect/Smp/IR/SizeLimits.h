//===- SizeLimits.h - Size limits of a parsed module -----------*- C++ -*-===//
//
// The ONNX importer checks every tensor it makes against the limits of
// smp/Support/CheckedMath.h as it goes. A module read as MLIR text
// (`smpc compile model.mlir`) did not pass through it, so it is checked
// once after parsing, before any pass or the planner computes a size from
// it: every value's tensor type (a block argument or an op result) must have
// a byte size that fits int64 and is at most kMaxTensorBytes, and every
// dense constant at most kMaxConstantBytes (a splat counts as its expanded
// size, as the artifact writer stores it).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SIZELIMITS_H
#define SMP_DIALECT_SMP_IR_SIZELIMITS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

namespace smp {

/// Success, or an error naming the first value or constant over its limit,
/// its op and its location (prefixed by `path`).
llvm::Error checkSizeLimits(mlir::ModuleOp module, llvm::StringRef path);

} // namespace smp

#endif // SMP_DIALECT_SMP_IR_SIZELIMITS_H
