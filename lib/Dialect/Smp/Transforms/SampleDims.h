//===- SampleDims.h - Where a forward's values hold the samples -*- C++ -*-===//
//
// Under data parallelism and micro-batches each shard (a rank's micro-batch)
// runs the forward on its own samples: the inputs' leading dim is split.
// That computes the whole batch's values only where every op works sample
// by sample. SampleDims follows the samples from the inputs through @main:
// for each value, the dim along which its samples lie (and how: see
// State::inner), none
// (computed from parameters and constants only), or the op that mixes the
// samples (a reduction, softmax, norm, contraction, slice or concat over the
// batch dim) or that the analysis cannot follow.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_TRANSFORMS_SAMPLEDIMS_H
#define SMP_LIB_TRANSFORMS_SAMPLEDIMS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

#include <string>

namespace smp {

class SampleDims {
public:
  struct State {
    enum Kind { None, Dim, Mixed, Unknown } kind = None;
    /// Dim: the dim holding the samples, and the run of consecutive indices
    /// along it that belong to one sample (its index i is sample
    /// (i / inner) mod the micro-batch: a [seq * batch] dim has inner 1, a
    /// [batch * seq] dim inner seq).
    int64_t dim = 0;
    /// Mixed, Unknown: the op, and (Mixed) what it does to the samples.
    mlir::Operation *op = nullptr;
    const char *why = "";
    int64_t inner = 1;
  };

  /// Follows the samples of the inputs (arguments named smp.input, whose
  /// leading dim is the micro-batch) through `f`'s body.
  explicit SampleDims(mlir::func::FuncOp f);

  State of(mlir::Value v) const;
  /// The micro-batch: the inputs' leading dim (0 without inputs).
  int64_t microbatch() const { return samples; }
  /// Whether `v` holds the samples sample-major along dim 0 (a contiguous
  /// run of its leading dim per sample, as the inputs are split).
  bool leading(mlir::Value v) const;
  /// Empty where `leading(v)`, else why not: the op that mixes or loses the
  /// samples, that `v` holds none, or where it holds them.
  std::string notLeading(mlir::Value v) const;

  /// Fails with an error on the op that mixes (or loses) the samples when
  /// `v` (`what`: how the training step uses it) is not computed sample by
  /// sample with its samples along dim `wantDim` (-1: any dim).
  mlir::LogicalResult check(mlir::Value v, llvm::StringRef what,
                            int64_t wantDim, int64_t dp,
                            int64_t microbatches) const;

  /// What a Mixed or Unknown state says of its op: "'smp.reduce_mean'
  /// reduces over the batch dim, mixing the batch's samples", "smp cannot
  /// follow the batch's samples through 'op'" (check's errors and
  /// smp-mark-sample-outputs' reasons).
  static std::string lostSamples(const State &s);

private:
  /// The micro-batch (the inputs' leading dim; 0 without inputs).
  int64_t samples = 0;
  llvm::DenseMap<mlir::Value, State> states;

  void visit(mlir::Operation *op);
  State transfer(mlir::Operation *op, unsigned result);
};

} // namespace smp

#endif // SMP_LIB_TRANSFORMS_SAMPLEDIMS_H
