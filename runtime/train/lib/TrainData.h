//===- TrainData.h - The samples a run feeds (internal) ---------*- C++ -*-===//
//
// The .npy samples of a training run (--data) or of its evaluations
// (--eval-data), checked against the compiled batch and fed batch by batch
// (Data.cpp), for Trainer.cpp and Evaluate.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_LIB_TRAINDATA_H
#define SMPRT_TRAIN_LIB_TRAINDATA_H

#include "smprt/Base.h"
#include "smprt/exec/Executor.h"
#include "smprt/train/Progress.h"

#include <functional>
#include <string>
#include <vector>

namespace smprt {

/// One data tensor: all samples of a graph input.
struct Dataset {
  std::string name;
  NpyArray samples;
  TensorRef batch; // the compiled input's dtype and shape; no data
  std::string batchBytes;
  /// The labels of a cross_entropy loss the artifact shifts
  /// (TrainingConfig.shift_labels): each sample's fed one place along its
  /// last dim, position t getting t + 1's and the last -100.
  bool shift = false;

  /// The batch with its bytes. Made when used: a pointer kept in `batch`
  /// dangled once the Dataset moved (into the vector, or as it grew) when
  /// the bytes fit in std::string's own buffer (a batch of one int64
  /// label: training read an error message as labels).
  TensorRef batchRef() const {
    TensorRef t = batch;
    t.data = const_cast<char *>(batchBytes.data());
    return t;
  }
};

using NoteFn = std::function<void(bool warning, const std::string &line)>;

/// Loads every data input this rank reads from `dir` (one .npy per input)
/// and checks it against the compiled batch: `samples` per input, `batch`
/// per step on this rank. `purpose` ("training", "evaluation") words the
/// errors; `onNote` hears how samples are converted.
Status loadDatasets(const Executor &exec, const std::string &dir,
                    const char *purpose, const NoteFn &onNote,
                    std::vector<Dataset> &data, int64_t &samples,
                    int64_t &batch);

/// Why the loss of this step is not finite, when the data says so: a batch
/// of an input holding NaN or Inf, or a batch whose every cross-entropy
/// label is the ignore index (the mean over no labels is 0/0). Empty when
/// the data looks fine.
std::string diagnoseNonFinite(const std::vector<Dataset> &data,
                              const std::string &loss);

/// The index among the `samples` of the `j`-th sample of data position
/// `k`'s global batch: the samples are one repeating stream. Modulo samples
/// at each term: k * globalBatch overflows int64 for a long enough run
/// (globalBatch <= samples here).
int64_t streamSample(int64_t k, int64_t j, int64_t samples,
                     int64_t globalBatch);

/// The labels input of a `cross_entropy:LOGITS:LABELS` loss (smpc --loss),
/// "" for another loss.
inline std::string crossEntropyLabels(const std::string &loss) {
  return loss.rfind("cross_entropy:", 0) == 0 ? loss.substr(loss.rfind(':') + 1)
                                              : std::string();
}

/// The label a `cross_entropy:` loss ignores (smpc's, PyTorch's
/// ignore_index): an evaluation's padding gets it, and a batch counts the
/// labels that are not it.
constexpr int64_t kIgnoredLabel = -100;

/// A global batch of an evaluation: the samples from `first` on (the
/// stream's), of which the first `real` are evaluated; the rest are
/// padding, whose rows of input `padLabels` are the ignore index -100.
struct BatchSlice {
  int64_t first = 0, real = 0;
  std::string padLabels;
};

/// Copies step `k`'s batch of every input into `data` and feeds it; with
/// `slice`, that global batch instead (k unused).
Status feedBatch(Executor &exec, std::vector<Dataset> &data, int64_t k,
                 int64_t samples, int64_t batch, int64_t globalBatch,
                 int64_t rank, const std::string &dataDir,
                 const BatchSlice *slice = nullptr);

/// Step k's scalars: the learning rate, the optimizer's own step count
/// (Adam's bias correction, SGD's first momentum step: from where its state
/// started) and what the dropout masks are drawn from (the seed, k).
Status feedStepScalars(Executor &exec, double lr, int64_t k,
                       int64_t optimizerStartStep);

//===--- Evaluate.cpp
//-------------------------------------------------------===//

/// The held-out samples of smprun --eval-data: global batches of them,
/// each evaluated by the step's forward with dropout off, the last one
/// short and padded (TrainingConfig.eval_pad_labels) or left out.
struct Evaluation {
  std::string dir;
  std::vector<Dataset> data;
  int64_t samples = 0;   // in the files
  int64_t batch = 0;     // samples of an evaluation's batch
  int64_t batches = 0;   // its batches, a short one included
  int64_t evaluated = 0; // samples evaluated (the rest is left out)
  std::string padLabels; // the input a short batch's padding is -100 in
  /// Per sample, its labels the loss counts (not -100): where a batch
  /// spans several global batches, its loss is their losses weighted by
  /// these (the mean over its counted labels).
  std::vector<int64_t> counted;
  /// Whether a batch's loss is the sum of its global batches' losses (a
  /// model's own loss that sums over the samples).
  bool sums = false;
  /// What an evaluation reports besides the loss (smpc --eval-accuracy,
  /// --eval-metrics: smp/base/EvalMetrics.h's names), and for each the
  /// step output of its hits over the labels (the accuracies), or "" (a
  /// metric of the eval_confusion output).
  std::vector<std::string> metrics, hitOutputs;
  /// The step returns each sample's predictions and labels
  /// (eval_predictions, eval_label_ids: smpc --eval-predictions, or a
  /// metric of them), and where this rank writes them ("": nowhere).
  bool predictions = false;
  std::string predictionsDir;
  /// The input whose first `evaluated` samples predictionsDir's
  /// label_ids.npy holds ("": the labels the loss reads, written with
  /// each evaluation).
  std::string labelIds;
  /// The loss is the mean squared error of the predictions (an mse loss
  /// that returns them), computed here: a short batch's padding left out.
  bool hostLoss = false;
};

/// Checks that `exec`'s artifact returns the predictions when `dir` (smprun
/// --eval-predictions) asks for them, and sets `eval`'s predictions; this
/// rank writes them into `dir` when it `reports`.
Status loadPredictions(const Executor &exec, const std::string &dir,
                       bool reports, Evaluation &eval);

/// Loads `dir`'s samples for evaluations of `exec`'s training artifact,
/// whose steps take `globalBatch` samples (this rank its share): refused
/// where the step's forward does not evaluate the model as PyTorch's
/// model.eval() does, where the artifact marks no forward, and with fewer
/// samples than a global batch where a short batch cannot be padded.
/// `note` says which samples are left out, and why.
Status loadEvaluation(const Executor &exec, const std::string &dir,
                      const NoteFn &onNote, int64_t globalBatch,
                      Evaluation &eval, std::string &note);

/// The mean loss of `eval`'s batches under the parameters of now (after
/// step `step`), each batch's the step's loss output of its forward
/// weighted by its samples (the Trainer's eval_loss); the batches are fed
/// as step `step`'s would be, this rank's share of each.
Status evaluate(Executor &exec, Evaluation &eval, int64_t step, int64_t rank,
                int64_t batch, int64_t globalBatch, EvalRecord &rec);

} // namespace smprt

#endif // SMPRT_TRAIN_LIB_TRAINDATA_H
