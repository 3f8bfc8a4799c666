//===- SmpLayout.h - The smp.layout of arguments and results ----*- C++ -*-===//
//
// The one place that reads and writes a function's `smp.layout` argument and
// result attributes (#smp.layout, SmpAttrs.td), and checks one against the
// value it describes. Passes, the artifact writer and the plan report go
// through these; none spells the attribute's name.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SMPLAYOUT_H
#define SMP_DIALECT_SMP_IR_SMPLAYOUT_H

#include "smp/Dialect/Smp/IR/SmpDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <optional>

namespace smp {

/// The layout of argument `i` / result `i` of `f`; null for a whole value.
LayoutAttr getArgLayout(mlir::FunctionOpInterface f, unsigned i);
LayoutAttr getResultLayout(mlir::FunctionOpInterface f, unsigned i);

/// Sets (or, with a null layout, removes) the layout of argument / result
/// `i` of `f`.
void setArgLayout(mlir::FunctionOpInterface f, unsigned i, LayoutAttr layout);
void setResultLayout(mlir::FunctionOpInterface f, unsigned i,
                     LayoutAttr layout);

/// `layout` as the named attribute an argument or result dictionary holds.
mlir::NamedAttribute namedLayout(LayoutAttr layout);

/// The size of the last axis of `shard.grid @name` of the module holding
/// `op` (e.g. "tp", "dp": the ranks a tensor is split over; a hybrid-sharded
/// @dp's shard groups), or nullopt when there is none.
std::optional<int64_t> gridSize(mlir::Operation *op, llvm::StringRef name);

/// Checks `attr` (the value of an `smp.layout` on `op`'s argument or result
/// of type `type`, `what` naming it: "argument #2") against the type and
/// the module's grids; emits an error on `op` and fails when they disagree.
mlir::LogicalResult verifyLayoutOf(mlir::Operation *op, mlir::Attribute attr,
                                   mlir::Type type, const llvm::Twine &what);

} // namespace smp

#endif // SMP_DIALECT_SMP_IR_SMPLAYOUT_H
