//===- Autodiff.h - Reverse-mode automatic differentiation ------*- C++ -*-===//

#ifndef SMP_DIALECT_SMP_AUTODIFF_AUTODIFF_H
#define SMP_DIALECT_SMP_AUTODIFF_AUTODIFF_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace smp {

/// Builds d(loss)/d(wrt[i]) for every value in `wrt`, walking the ops of
/// `body` backwards from `loss` (a scalar). New ops go at the builder's
/// insertion point. An entry is null when no gradient reaches that value.
/// Fails with a diagnostic on an op that needs a gradient but has none.
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
differentiate(mlir::OpBuilder &builder, mlir::Block &body, mlir::Value loss,
              llvm::ArrayRef<mlir::Value> wrt);

} // namespace smp

#endif // SMP_DIALECT_SMP_AUTODIFF_AUTODIFF_H
