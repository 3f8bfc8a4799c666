//===- BaseTypes.h - MLIR element types as smp_base dtypes ------*- C++ -*-===//
//
// The one mapping from an MLIR element type to the runtime's dtype
// (smp/base/DType.h), for the artifact writer and for the importer's reading
// of initializer bytes.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_BASETYPES_H
#define SMP_DIALECT_SMP_IR_BASETYPES_H

#include "mlir/IR/Types.h"
#include "smp/base/DType.h"

#include <optional>

namespace smp {

/// The dtype of an element type (f32, f64, f16, bf16, i1 as bool, signless
/// integers as signed); nullopt for any other type.
std::optional<smp::base::DType> baseDType(mlir::Type t);

} // namespace smp

#endif // SMP_DIALECT_SMP_IR_BASETYPES_H
