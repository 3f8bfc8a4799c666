//===- TensorParallelInterface.h - Sharding rules ---------------*- C++ -*-===//

#ifndef SMP_INTERFACES_TENSORPARALLELINTERFACE_H
#define SMP_INTERFACES_TENSORPARALLELINTERFACE_H

#include "mlir/IR/OpDefinition.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace smp {

/// How tensor parallelism splits a value: each rank holds 1/tp of dimension
/// `dim`, viewed as [blocks, n], along n (blocks > 1 for a fused QKV
/// projection that an equal split cuts into Q, K and V).
struct TpShard {
  int64_t dim = 0;
  int64_t blocks = 1;
  bool operator==(const TpShard &o) const {
    return dim == o.dim && blocks == o.blocks;
  }
};

/// What a sharding rule asks of one operand.
struct TpOperandLayout {
  enum class Kind {
    /// Every rank reads it whole (it does not span the split dimension).
    Whole,
    /// An activation the region splits as `shard`.
    Split,
    /// A value computed from parameters only, sliced as `shard`.
    SplitWeight,
    /// Read whole by every rank where the region starts (a column-parallel
    /// matmul's input): the pass enters the region with a smp.tp_copy.
    Enter,
  };
  Kind kind = Kind::Whole;
  TpShard shard;

  static TpOperandLayout whole() { return {Kind::Whole, {}}; }
  static TpOperandLayout split(TpShard s) { return {Kind::Split, s}; }
  static TpOperandLayout splitWeight(TpShard s) {
    return {Kind::SplitWeight, s};
  }
  static TpOperandLayout enter() { return {Kind::Enter, {}}; }
};

} // namespace smp

#include "smp/Interfaces/TensorParallelInterface.h.inc"

#endif // SMP_INTERFACES_TENSORPARALLELINTERFACE_H
