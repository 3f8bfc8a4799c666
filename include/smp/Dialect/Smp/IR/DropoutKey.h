//===- DropoutKey.h - Dropout keys of ops that draw masks -------*- C++ -*-===//
//
// smp.dropout and the fused attention ops (a dropout on their
// probabilities, ratio != 0) carry the same key attributes: ratio, stream
// and where the op's tensor sits in the global one (Smp_DropoutPlacement in
// SmpOps.td). The passes that place a mask (smp-key-dropout, the
// micro-batch copies of smp-build-gradients, the tensor-parallel rules) and
// the ops made from a keyed op (an attention's gradient, its packed form)
// read and write them here, whichever op holds them.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_DROPOUTKEY_H
#define SMP_DIALECT_SMP_IR_DROPOUTKEY_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/StringRef.h"

namespace smp {

/// The key's placement attributes (ratio and stream aside), with the
/// defaults Smp_DropoutPlacement gives them.
enum class DropoutPlace {
  Samples,
  SampleOffset,
  ShardSamples,
  TpDim,
  TpParts,
  TpBlocks
};

/// Whether `op` draws a dropout mask: smp.dropout, or an attention op whose
/// ratio is not 0.
bool drawsDropout(mlir::Operation *op);

/// The stream of an op that draws a mask.
int64_t dropoutStream(mlir::Operation *op);

/// The operand whose dim 0 holds the samples of the mask's tensor (leading
/// like it): smp.dropout's input, an attention's query, a packed
/// attention's qkv.
mlir::Value dropoutSampled(mlir::Operation *op);

/// A placement attribute of a keyed op (its default when unset).
int64_t getDropoutPlace(mlir::Operation *op, DropoutPlace p);
void setDropoutPlace(mlir::Operation *op, DropoutPlace p, int64_t value);

/// Records a tensor-parallel split of dim `dim` of the mask's tensor into
/// `parts` of `blocks` blocks each (tp_dim, tp_parts, tp_blocks): what the
/// tp rules and sequence parallelism set on a keyed op they split.
void setDropoutTpSplit(mlir::Operation *op, int64_t dim, int64_t parts,
                       int64_t blocks);

/// Copies the key (ratio, stream, placement) of `from` onto `to` (an op made
/// from a keyed one: it draws the same mask); nothing when `from` draws
/// none.
void copyDropoutKey(mlir::Operation *from, mlir::Operation *to);

} // namespace smp

#endif // SMP_DIALECT_SMP_IR_DROPOUTKEY_H
