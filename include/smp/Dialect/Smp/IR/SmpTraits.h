//===- SmpTraits.h - Traits of smp ops --------------------------*- C++ -*-===//
//
// Traits that passes query instead of listing ops by name. They live in
// mlir::OpTrait::smp, as upstream TOSA's traits live in mlir::OpTrait::tosa.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SMPTRAITS_H
#define SMP_DIALECT_SMP_IR_SMPTRAITS_H

#include "mlir/IR/OpDefinition.h"

namespace mlir::OpTrait::smp {

/// An elementwise op whose operands broadcast numpy-style to the result's
/// shape (add, mul, where, the comparisons, ...). Upstream's `Elementwise`
/// requires every non-scalar operand to have the result's shape, so these
/// ops carry this trait instead.
template <typename ConcreteType>
class BroadcastingElementwise
    : public mlir::OpTrait::TraitBase<ConcreteType, BroadcastingElementwise> {
};

} // namespace mlir::OpTrait::smp

#endif // SMP_DIALECT_SMP_IR_SMPTRAITS_H
