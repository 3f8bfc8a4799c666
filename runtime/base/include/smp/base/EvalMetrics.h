//===- EvalMetrics.h - The metrics of an evaluation -------------*- C++ -*-===//
//
// The metrics smpc --eval-metrics accepts, the artifact records and smprun
// reports (as eval_NAME): what a Hugging Face Trainer user's compute_metrics
// returns for a classifier, with scikit-learn's definitions (the GLUE
// metrics of `evaluate`: accuracy, binary f1, matthews_correlation; f1,
// precision and recall averaged over the classes), and for a regression
// (an mse loss: GLUE's STS-B) scipy's Pearson and Spearman correlations
// of the predictions, which the step gathers (eval_predictions). `accuracy`
// comes from the hits and labels the step counts (any vocabulary,
// vocabulary-parallel logits too); every other one from the confusion matrix
// the step counts (eval_confusion: [label, argmax class] over the labels the
// loss's cross-entropy reads), which a classifier of at most
// kMaxConfusionClasses classes can afford.
// One list for the compiler's flag checks, the artifact's validation and the
// runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_BASE_EVALMETRICS_H
#define SMP_BASE_EVALMETRICS_H

#include <cstdint>
#include <string>
#include <string_view>

namespace smp::base {

/// The training step's outputs an evaluation's metrics are computed from
/// (f32, this rank's counts summed over the data-parallel ranks): the
/// labels the loss's cross-entropy reads and those whose logit is the row's
/// first maximum (scalars), those among the row's K first (evalTopHitsOutput:
/// topK_accuracy), and the confusion matrix (row: the label, column: the
/// row's argmax class).
inline constexpr const char kEvalHitsOutput[] = "eval_hits";
inline constexpr const char kEvalLabelsOutput[] = "eval_labels";
inline constexpr const char kEvalConfusionOutput[] = "eval_confusion";

/// "eval_hits_top5" for K = 5.
inline std::string evalTopHitsOutput(int64_t k) {
  return std::string(kEvalHitsOutput) + "_top" + std::to_string(k);
}

/// Whether `name` is an output an evaluation's metrics are computed from
/// (summed over the data-parallel ranks, run by evaluations only).
bool isEvalCountOutput(std::string_view name);

/// An evaluation's predictions (smpc --eval-predictions, and the metrics
/// computed from them): per sample, the argmax class of each row of the
/// loss's cross-entropy logits (an mse loss: its output's values) and the
/// labels they are scored against (an mse loss: its target's values; a
/// label the cross-entropy ignores stays -100), f32 [samples, values per
/// sample], gathered over the data-parallel ranks in the global batch's
/// order (run by evaluations only).
inline constexpr const char kEvalPredictionsOutput[] = "eval_predictions";
inline constexpr const char kEvalLabelIdsOutput[] = "eval_label_ids";

/// Whether `name` is one of the two outputs above.
inline bool isEvalGatherOutput(std::string_view name) {
  return name == kEvalPredictionsOutput || name == kEvalLabelIdsOutput;
}

/// Whether `name` is an output only evaluations compute.
inline bool isEvalOutput(std::string_view name) {
  return isEvalCountOutput(name) || isEvalGatherOutput(name);
}

/// The most classes an evaluation's confusion matrix counts.
inline constexpr int64_t kMaxConfusionClasses = 1024;

/// The names, as smpc --eval-metrics takes them and smprun reports them
/// (eval_NAME). `f1`, `precision` and `recall` are scikit-learn's default
/// average='binary' (class 1 positive: two classes only); the _macro,
/// _micro and _weighted ones average over the classes present in the labels
/// or the predictions, as scikit-learn does. Besides these, `topK_accuracy`
/// for K from 2 to 1000 (topKAccuracy).
inline constexpr const char *kEvalMetrics[] = {"accuracy",
                                               "f1",
                                               "f1_macro",
                                               "f1_micro",
                                               "f1_weighted",
                                               "precision",
                                               "precision_macro",
                                               "precision_micro",
                                               "precision_weighted",
                                               "recall",
                                               "recall_macro",
                                               "recall_micro",
                                               "recall_weighted",
                                               "matthews_correlation",
                                               "pearson",
                                               "spearmanr"};

/// "accuracy, f1, ... or matthews_correlation, topK_accuracy (...)".
std::string evalMetricList();

/// K of `topK_accuracy` (2 <= K <= 1000: the share of the labels among
/// their row's K first classes, ties to the lower class as torch.argmax;
/// timm's top5, scikit-learn's top_k_accuracy_score), else 0.
int64_t topKAccuracy(std::string_view name);

bool isEvalMetric(std::string_view name);

/// Computed from the predictions: a regression's correlations (scipy's
/// pearsonr and spearmanr of the predicted and the target values, as
/// `evaluate`'s GLUE STS-B metric reports them).
inline bool needsPredictions(std::string_view name) {
  return name == "pearson" || name == "spearmanr";
}

/// Computed from the confusion matrix (all but the accuracies and the
/// correlations).
inline bool needsConfusion(std::string_view name) {
  return isEvalMetric(name) && name != "accuracy" && topKAccuracy(name) == 0 &&
         !needsPredictions(name);
}

/// scikit-learn's average='binary': two classes only.
inline bool isBinaryMetric(std::string_view name) {
  return name == "f1" || name == "precision" || name == "recall";
}

/// Metric `name` (needsConfusion) of the confusion matrix `counts`
/// ([classes, classes], row: the label, column: the predicted class),
/// as scikit-learn computes it from the labels and predictions it counts
/// (zero_division 0; matthews_correlation 0 where undefined).
double evalMetric(std::string_view name, const double *counts, int64_t classes);

/// Metric `name` (needsPredictions) of `n` predicted values and their
/// targets, as scipy computes it in float64: Pearson's r; Spearman's rho,
/// Pearson's r of their ranks (ties at their average rank, as
/// scipy.stats.rankdata). NaN for fewer than 2 values or a constant side.
double predictionMetric(std::string_view name, const double *predicted,
                        const double *target, int64_t n);

} // namespace smp::base

#endif // SMP_BASE_EVALMETRICS_H
