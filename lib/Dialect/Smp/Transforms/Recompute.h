//===- Recompute.h - Activation checkpointing in the built backward -------===//

#ifndef SMP_LIB_TRANSFORMS_RECOMPUTE_H
#define SMP_LIB_TRANSFORMS_RECOMPUTE_H

#include "mlir/IR/Block.h"

namespace smp {

/// Makes the backward ops in [backwardBegin, backwardEnd) read recomputed
/// copies of the forward's values instead of the originals, segment by
/// segment (`mode`: "full", "selective" or "gathers"; see Recompute.cpp). `forward`
/// lists the forward ops in order. Returns the number of ops cloned.
size_t recomputeActivations(llvm::ArrayRef<mlir::Operation *> forward,
                            mlir::Block::iterator backwardBegin,
                            mlir::Block::iterator backwardEnd,
                            llvm::StringRef mode);

/// Moves the forward values that the backward ops in [backwardBegin,
/// backwardEnd) read (and that are at least `minBytes`) to host memory: an
/// `smp.offload` right after the value's last forward use, an `smp.prefetch`
/// before the backward needs it, `horizon` prefetches ahead (the prefetch of
/// the k-th value to be read is placed before the first backward read of the
/// (k - horizon)-th), and the backward reads the prefetched copy. Returns
/// the number of values offloaded.
size_t offloadActivations(llvm::ArrayRef<mlir::Operation *> forward,
                          mlir::Block::iterator backwardBegin,
                          mlir::Block::iterator backwardEnd, int64_t horizon,
                          int64_t minBytes);

} // namespace smp

#endif // SMP_LIB_TRANSFORMS_RECOMPUTE_H
