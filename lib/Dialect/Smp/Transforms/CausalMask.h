//===- CausalMask.h - Whether a mask value is causal ------------*- C++ -*-===//
//
// smp-raise-attention gives smp.attention `causal = true` instead of a mask
// operand when the mask is exactly the causal one: the kernels then skip the
// blocks above the diagonal without reading an [S, S] tensor, and the cost
// model counts half the pairs. This analysis proves it from the IR.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_DIALECT_SMP_TRANSFORMS_CAUSALMASK_H
#define SMP_LIB_DIALECT_SMP_TRANSFORMS_CAUSALMASK_H

#include "mlir/IR/Value.h"
#include "smp/Dialect/Smp/IR/CausalValues.h"

#include <optional>

namespace smp {

/// `v`'s causal values when the IR proves them: a constant, a trilu of a
/// splat, a frozen argument the importer marked (smp.causal_values), and
/// what not, equal, where, cast and reshapes, expands and slices that keep
/// the trailing [S, S] make of those. Nullopt otherwise (not known, or not
/// causal, or S < 2).
std::optional<CausalValues> causalValues(mlir::Value v);

} // namespace smp

#endif // SMP_LIB_DIALECT_SMP_TRANSFORMS_CAUSALMASK_H
