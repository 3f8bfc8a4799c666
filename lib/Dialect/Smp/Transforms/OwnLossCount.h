//===- OwnLossCount.h - Which labels a model's own loss counts --*- C++ -*-===//
//
// An evaluation in batches other than the training's global batch
// (smpc --eval-batch-size: the Hugging Face Trainer's
// per_device_eval_batch_size) runs each of them as global batches and
// weighs their losses by the labels each counts, which gives the mean over
// the evaluation batch's counted labels only where the loss is such a
// mean. For a model's own loss output (`--loss NAME`) that is an affine
// function (constant or parameter scalings and offsets) of one
// cross-entropy mean without class weights whose labels are an input's
// values moved by slices, reshapes, casts and concatenations with -100 (a
// Hugging Face language model shifting its labels: `pad(labels, (0, 1),
// -100)[..., 1:]`), OwnLossCount finds the elements of each sample's
// labels that the cross-entropy reads: the runtime counts those that are
// not -100 (TrainingConfig.eval_counted_labels). A loss that is a sum over
// the samples (constant combinations of sums that padding leaves alone: a
// cross-entropy with reduction='sum') is the sum of its global batches'
// instead (TrainingConfig.eval_loss_sums).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_TRANSFORMS_OWNLOSSCOUNT_H
#define SMP_LIB_TRANSFORMS_OWNLOSSCOUNT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace smp {

/// Whether the scalar `loss` of `f`, which padding samples leave alone
/// (OwnLossPadding), is a combination with constant coefficients of
/// cross-entropy sums and sums over the batch, with no term the batch does
/// not change: an evaluation batch's loss is then the sum of its parts'.
bool lossSumsSamples(mlir::func::FuncOp f, mlir::Value loss);

/// For the scalar `loss` of `f` whose cross-entropy reads the input named
/// `labels`: the ranges [begin, end) of a sample's flattened labels (the
/// same for every sample) that the cross-entropy reads, as pairs; empty,
/// with `why` (a sentence part after "smp cannot weigh the batches of the
/// model's own loss by the labels it counts: "), where the loss has another
/// form.
llvm::SmallVector<int64_t> countedLabelRanges(mlir::func::FuncOp f,
                                              mlir::Value loss,
                                              llvm::StringRef labels,
                                              std::string &why);

} // namespace smp

#endif // SMP_LIB_TRANSFORMS_OWNLOSSCOUNT_H
