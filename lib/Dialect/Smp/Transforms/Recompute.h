//===- Recompute.h - Activation checkpointing in the built backward -------===//

#ifndef SMP_LIB_TRANSFORMS_RECOMPUTE_H
#define SMP_LIB_TRANSFORMS_RECOMPUTE_H

#include "mlir/IR/Block.h"

namespace smp {

/// Makes the backward ops in [backwardBegin, backwardEnd) read recomputed
/// copies of the forward's values instead of the originals, segment by
/// segment (`mode`: "full" or "selective"; see Recompute.cpp). `forward`
/// lists the forward ops in order. Returns the number of ops cloned.
size_t recomputeActivations(llvm::ArrayRef<mlir::Operation *> forward,
                            mlir::Block::iterator backwardBegin,
                            mlir::Block::iterator backwardEnd,
                            llvm::StringRef mode);

} // namespace smp

#endif // SMP_LIB_TRANSFORMS_RECOMPUTE_H
