//===- EvalAccuracy.h - An evaluation's accuracy (internal) -----*- C++ -*-===//
//
// smp-build-gradients --eval-accuracy: besides the loss, each micro-batch
// counts the labels its cross-entropy reads (not its ignore_index) and
// those whose logit is the row's first maximum (torch.argmax(-1) == label:
// smp.label_rank of 0). The step returns their sums as the outputs
// `eval_hits` and `eval_labels` (summed over the dp ranks by
// smp-gradient-all-reduce); an evaluation's accuracy is the hits over the
// labels of all its batches (the Hugging Face Trainer's compute_metrics on
// every prediction at once). --eval-metrics' topK_accuracy counts the
// labels of rank below K (`eval_hits_topK`); its F1, precision, recall and
// Matthews' correlation (smp/base/EvalMetrics.h) the confusion matrix,
// `eval_confusion` [label, argmax class].
// Only evaluations run these ops (the artifact writer marks them
// eval_only).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_DIALECT_SMP_TRANSFORMS_EVALACCURACY_H
#define SMP_LIB_DIALECT_SMP_TRANSFORMS_EVALACCURACY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "smp/base/EvalMetrics.h"

#include <optional>

namespace smp {

/// The outputs an evaluation's metrics are computed from.
using smp::base::kEvalConfusionOutput;
using smp::base::kEvalHitsOutput;
using smp::base::kEvalLabelsOutput;

/// One micro-batch's cross-entropy, as the accuracy reads it.
struct AccuracyOperands {
  mlir::Value logits, labels;
  int64_t ignoreIndex = -100;
  int64_t classes = 0; // the valid classes of a row (0: all of it)
  /// Vocabulary-parallel logits: this rank's first class and each row's
  /// label logit over every tp rank (null otherwise).
  mlir::Value offset, target;
};

/// The one smp.cross_entropy a model's own loss `loss` (output `name`) is
/// computed from; an error on `f`, naming `flag`, when there is none or
/// more than one.
mlir::FailureOr<AccuracyOperands> ownLossCrossEntropy(mlir::func::FuncOp f,
                                                      mlir::Value loss,
                                                      llvm::StringRef name,
                                                      llvm::StringRef flag);

/// How many smp.cross_entropy ops a model's own loss is computed from.
int64_t ownLossCrossEntropies(mlir::Value loss);

/// The one mean squared error (a mean over every element of d * d or
/// d ^ 2, d = output - target: nn.MSELoss) a model's own loss `loss`
/// (output `name`) is computed from: (output, target), the output the one
/// computed from parameters. An error on `f`, naming `flag`, when there is
/// none or more than one.
mlir::FailureOr<std::pair<mlir::Value, mlir::Value>>
ownLossSquaredError(mlir::func::FuncOp f, mlir::Value loss,
                    llvm::StringRef name, llvm::StringRef flag);

/// What an evaluation reads of a model's own loss `loss` (output `name`;
/// `flag` asked for it; `metrics`, and `accuracy` for --eval-accuracy):
/// its one cross-entropy, or, for a metric of values (pearson) or
/// predictions alone of a loss with no cross-entropy, its one mean squared
/// error. An error on `f` for metrics of both kinds, or no such loss.
mlir::LogicalResult ownLossEvaluation(
    mlir::func::FuncOp f, mlir::Value loss, llvm::StringRef name,
    llvm::StringRef flag, llvm::ArrayRef<std::string> metrics, bool accuracy,
    std::optional<AccuracyOperands> &crossEntropy,
    std::optional<std::pair<mlir::Value, mlir::Value>> &squaredError);

/// An evaluation's counts of one cross-entropy's labels (f32 scalars): for
/// each K asked for, those among their row's K first classes (K = 1: the
/// accuracy's hits), and the labels.
struct AccuracyCounts {
  llvm::SmallVector<mlir::Value> hits;
  mlir::Value labels;
};

/// Appends the ops counting `a`'s labels and those of label rank below each
/// of `ks`. Under vocabulary parallelism the label ranks are summed over
/// the tp ranks first. An error on `f` for a K of at least the classes.
mlir::FailureOr<AccuracyCounts>
buildAccuracy(mlir::OpBuilder &b, mlir::Location loc, mlir::func::FuncOp f,
              const AccuracyOperands &a, llvm::ArrayRef<int64_t> ks);

/// Appends the ops counting `a`'s labels by their row's first maximum
/// (torch.argmax: a NaN first): [classes, classes] f32, row the label,
/// column the argmax class. An error on `f` where the logits are split
/// over the tp ranks, or have more classes than EvalMetrics.h's limit or
/// than a binary metric of `metrics` allows.
mlir::FailureOr<mlir::Value>
buildConfusion(mlir::OpBuilder &b, mlir::Location loc, mlir::func::FuncOp f,
               const AccuracyOperands &a, llvm::ArrayRef<std::string> metrics);

/// One micro-batch's predictions and the labels (targets) they are scored
/// against, f32 [samples, values per sample] (smp/base/EvalMetrics.h's
/// eval_predictions and eval_label_ids).
struct Predictions {
  mlir::Value predicted, labels;
};

/// The argmax class of each row of `a`'s logits (torch.argmax: the first
/// maximum, or the first NaN), or with `logits` the rows themselves
/// ([samples, rows, classes]: at most kMaxConfusionClasses classes), and
/// `a`'s labels, over `samples` samples whose rows lie sample-major. An
/// error on `f` where the logits are split over the tp ranks or padded.
mlir::FailureOr<Predictions>
buildPredictions(mlir::OpBuilder &b, mlir::Location loc, mlir::func::FuncOp f,
                 const AccuracyOperands &a, int64_t samples, bool logits);

/// An mse loss's predictions: `output`'s values and `target`'s.
mlir::FailureOr<Predictions>
buildRegressionPredictions(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::func::FuncOp f, mlir::Value output,
                           mlir::Value target, int64_t samples);

/// Micro-batch `i` of `m`'s predictions ([samples, ...]) among zeros at
/// its samples' place in the rank's batch ([m * samples, ...]): the
/// micro-batches' sum holds each one's.
mlir::Value placeMicrobatch(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value v, int64_t i, int64_t m);

/// An error on `f` for a metric of predicted values (pearson) with a
/// cross-entropy loss, or one of classes (`accuracy`: --eval-accuracy too)
/// with an mse loss (`regressionLoss`).
mlir::LogicalResult checkEvalMetricsFit(mlir::func::FuncOp f,
                                        llvm::ArrayRef<std::string> metrics,
                                        bool accuracy, llvm::StringRef loss,
                                        bool regressionLoss);

} // namespace smp

#endif // SMP_LIB_DIALECT_SMP_TRANSFORMS_EVALACCURACY_H
