//===- Evaluate.cpp - The loss of held-out samples (smprun --eval-data) ---===//
//
// An evaluation runs the training step's forward (the instructions marked
// `forward`: what the "loss" output is computed from) with dropout off on
// each global batch of the held-out samples, and averages the batches'
// losses weighted by their samples, as the Hugging Face Trainer's
// evaluation loop does. A short last batch is padded to the global batch
// with held-out samples whose labels are -100 (a cross-entropy mean
// leaves them out, and so do some forms of a model's own loss:
// TrainingConfig.eval_pad_labels), else left out; so are the evaluation
// batches of smpc --eval-batch-size (TrainingConfig.eval_batch), each run
// as global batches whose losses are weighted by the labels they count (a
// cross_entropy:LOGITS:LABELS loss, or a model's own loss where smpc found
// which labels its cross-entropy mean reads: eval_counted_labels), or
// summed (an own loss that is a sum over the samples: eval_loss_sums).
// With smpc --eval-accuracy the step's forward also counts the labels its
// cross-entropy reads and those it ranks first (outputs eval_labels and
// eval_hits): the accuracy is their ratio over every batch, as the Hugging
// Face Trainer's compute_metrics takes it over every prediction at once;
// with --eval-metrics it also counts them by their row's argmax class
// (output eval_confusion), summed over the batches into the F1, precision,
// recall or Matthews' correlation scikit-learn gives on every prediction.
// With smpc --eval-predictions (or --eval-metrics pearson, spearmanr) the
// step returns each sample's predictions and labels: the real samples'
// are kept (the correlations' input, and what --eval-predictions DIR
// writes), and an mse loss's eval loss is their mean squared error, so
// that a short batch is padded rather than left out.
// The parameters and the optimizer's state are only read.
//
//===----------------------------------------------------------------------===//

#include "TrainData.h"

#include "smp/base/EvalMetrics.h"
#include "smp/kernels/common/Elements.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

namespace smprt {

namespace {

/// Each held-out sample's labels a cross-entropy counts (not -100), read
/// from the labels file on every rank (a pipeline's first stage reads no
/// labels, and the batch's weights are needed where its loss is reported):
/// of the sample's flattened labels, those in `ranges` ([begin, end)
/// pairs: a model's own loss reads those), else all; where the artifact
/// shifts them as it feeds them (TrainingConfig.shift_labels) all but each
/// run of `shifted` labels' first, which the shift drops.
Status countLabels(const std::string &dir,
                   const google::protobuf::RepeatedField<int64_t> &ranges,
                   bool shifted, Evaluation &eval) {
  std::string path = dir + "/" + fileNameFor(eval.padLabels) + ".npy";
  NpyArray labels;
  if (Status s = readNpy(path, labels, /*map=*/true); !s.ok())
    return s;
  if (!isInteger(labels.dtype) || labels.shape.empty() ||
      labels.shape[0] != eval.samples)
    return Status::failure(path + ": the labels '" + eval.padLabels +
                           "' are not integers of " +
                           std::to_string(eval.samples) + " samples");
  int64_t per = 1;
  for (size_t d = 1; d < labels.shape.size(); ++d)
    per *= labels.shape[d];
  std::vector<int64_t> read(ranges.begin(), ranges.end());
  if (read.empty())
    read = {0, per};
  for (size_t r = 0; r + 1 < read.size(); r += 2)
    if (read[r] < 0 || read[r] > read[r + 1] || read[r + 1] > per)
      return Status::failure(path + ": " + std::to_string(per) +
                             " labels per sample, where the artifact's loss "
                             "counts up to label " +
                             std::to_string(read[r + 1]) +
                             " (it was compiled for other labels)");
  eval.counted.assign(eval.samples, 0);
  for (int64_t i = 0; i < eval.samples; ++i)
    for (size_t r = 0; r + 1 < read.size(); r += 2)
      for (int64_t e = read[r]; e < read[r + 1]; ++e)
        eval.counted[i] +=
            !(shifted && e % labels.shape.back() == 0) &&
            smp::kernels::common::loadIndex(labels.data(), labels.dtype,
                                            i * per + e) != kIgnoredLabel;
  return Status::success();
}

} // namespace

/// The artifact's --eval-metrics (and --eval-accuracy), each checked
/// against the output it is computed from.
Status loadMetrics(const Executor &exec, Evaluation &eval) {
  const Artifact &artifact = exec.artifact();
  auto hasOutput = [&](const std::string &wanted) {
    for (const auto &o : artifact.program.outputs())
      if (o.name() == wanted)
        return true;
    return false;
  };
  std::vector<std::string> names(
      artifact.manifest.training().eval_metrics().begin(),
      artifact.manifest.training().eval_metrics().end());
  // An artifact of an smpc that recorded no names: its counts say.
  if (names.empty() && hasOutput(smp::base::kEvalHitsOutput))
    names.push_back("accuracy");
  for (const std::string &name : names) {
    if (!smp::base::isEvalMetric(name))
      return Status::failure("--eval-data: the artifact asks for the "
                             "metric '" +
                             name +
                             "', which this smprun does not know; "
                             "recompile it with this smpc");
    int64_t k = smp::base::topKAccuracy(name);
    std::string hits = name == "accuracy" ? smp::base::kEvalHitsOutput
                       : k                ? smp::base::evalTopHitsOutput(k)
                                          : "";
    std::string from = !hits.empty() ? hits
                       : smp::base::needsPredictions(name)
                           ? smp::base::kEvalPredictionsOutput
                           : smp::base::kEvalConfusionOutput;
    if (!hasOutput(from))
      return Status::failure("--eval-data: the artifact asks for " + name +
                             " but has no " + from +
                             " output to compute it from; recompile it");
    eval.metrics.push_back(name);
    eval.hitOutputs.push_back(hits);
  }
  eval.predictions = hasOutput(smp::base::kEvalPredictionsOutput) &&
                     hasOutput(smp::base::kEvalLabelIdsOutput);
  return Status::success();
}

Status loadPredictions(const Executor &exec, const std::string &dir,
                       bool reports, Evaluation &eval) {
  if (dir.empty())
    return Status::success();
  if (!eval.predictions)
    return Status::failure(
        "--eval-predictions " + dir + ": " + exec.artifact().dir +
        " does not return an evaluation's predictions; recompile it with "
        "smpc --eval-predictions");
  if (!reports)
    return Status::success();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    return Status::failure("--eval-predictions " + dir +
                           ": cannot create the directory (" +
                           (ec ? ec.message() : "not a directory") + ")");
  eval.predictionsDir = dir;
  // The Trainer's label_ids are the labels input as fed (a causal LM's
  // unshifted): the loss's LABELS or TARGET, a model's own loss's input
  // named `labels` (the Trainer's label_names) or the one its padding
  // marks; else the labels the loss reads (eval_label_ids).
  const auto &training = exec.artifact().manifest.training();
  const std::string &loss = training.loss();
  size_t colon = loss.rfind(':');
  std::vector<std::string> names;
  if (colon != std::string::npos)
    names = {loss.substr(colon + 1)};
  else
    names = {"labels", training.eval_pad_labels()};
  // Read from the held-out files: a pipeline's first stage, which
  // reports, feeds no labels.
  for (const std::string &name : names) {
    std::string path = eval.dir + "/" + fileNameFor(name) + ".npy";
    NpyArray labels;
    if (name.empty() || !std::filesystem::exists(path) ||
        !readNpy(path, labels, /*map=*/true).ok() || labels.shape.empty() ||
        labels.shape[0] < eval.evaluated)
      continue;
    TensorRef rows = labels.ref();
    rows.shape[0] = eval.evaluated;
    if (Status s = writeNpy(dir + "/label_ids.npy", rows); !s.ok())
      return Status::failure("--eval-predictions: " + s.error);
    eval.labelIds = name;
    break;
  }
  return Status::success();
}

Status loadEvaluation(const Executor &exec, const std::string &dir,
                      const NoteFn &onNote, int64_t globalBatch,
                      Evaluation &eval, std::string &note) {
  const Artifact &artifact = exec.artifact();
  const std::string &why = artifact.manifest.training().eval_refusal();
  if (!why.empty())
    return Status::failure("--eval-data: " + why);
  bool marked = false;
  for (const auto &inst : artifact.program.instructions())
    marked = marked || inst.forward();
  if (!marked)
    return Status::failure("--eval-data: the artifact marks no instruction "
                           "of the loss's forward (an older smpc compiled "
                           "it); recompile it");
  eval.dir = dir;
  int64_t evalBatch; // the artifact's, as training's
  if (Status s = loadDatasets(exec, dir, "evaluation", onNote, eval.data,
                              eval.samples, evalBatch);
      !s.ok())
    return s;
  // Every rank pads alike (a pipeline's first stage reads no labels), as
  // the compiler decided: its labels input is int64.
  const auto &training = artifact.manifest.training();
  const std::string &noPad = training.eval_no_pad();
  eval.padLabels = training.eval_pad_labels();
  int64_t wanted =
      training.eval_batch() > 0 ? training.eval_batch() : globalBatch;
  // A model's own loss is weighed by the labels its cross-entropy reads
  // (it may shift them), where smpc found which: else its batches are
  // global ones.
  bool ownLoss = training.loss().find(':') == std::string::npos;
  eval.sums = training.eval_loss_sums();
  if (Status s = loadMetrics(exec, eval); !s.ok())
    return s;
  if (!eval.padLabels.empty() && ownLoss && wanted != globalBatch &&
      training.eval_counted_labels().empty() && !eval.sums) {
    note = "smprun: the artifact evaluates in batches of " +
           std::to_string(wanted) +
           " (smpc --eval-batch-size), but smp cannot weigh the batches of "
           "the model's own loss output '" +
           training.loss() + "' by the labels it counts (" +
           training.eval_no_count() + "): each evaluation runs the global " +
           "batches of " + std::to_string(globalBatch) +
           ", the last one short and padded";
    wanted = globalBatch;
  }
  if (!eval.padLabels.empty()) {
    eval.batch = wanted;
    eval.batches = (eval.samples + wanted - 1) / wanted;
    eval.evaluated = eval.samples;
    if (wanted == globalBatch || eval.sums)
      return Status::success();
    return countLabels(dir, training.eval_counted_labels(),
                       training.shift_labels() && !ownLoss, eval);
  }
  // An mse loss whose step returns its predictions: every sample counts,
  // a short batch padded with the stream's next samples, and the loss is
  // the mean squared error of the real samples' predictions (as the
  // Trainer's batch means weighted by their samples: every sample holds as
  // many values).
  bool mse = training.loss().rfind("mse:", 0) == 0;
  if (mse && eval.predictions) {
    eval.hostLoss = true;
    eval.batch = globalBatch;
    eval.batches = (eval.samples + globalBatch - 1) / globalBatch;
    eval.evaluated = eval.samples;
    return Status::success();
  }
  eval.batch = globalBatch;
  std::string because =
      noPad.empty() ? std::string() : " and cannot pad a short one: " + noPad;
  if (wanted != globalBatch)
    note = "smprun: the artifact evaluates in batches of " +
           std::to_string(wanted) + " (smpc --eval-batch-size), but the loss " +
           "cannot leave padding out (" + noPad +
           "): each evaluation runs the global batches of " +
           std::to_string(globalBatch) +
           " (the same eval loss where every sample weighs alike, as in an "
           "mse loss)";
  int64_t whole = eval.samples / globalBatch,
          rest = eval.samples - whole * globalBatch;
  if (whole == 0)
    return Status::failure(dir + ": holds " + std::to_string(eval.samples) +
                           " samples, fewer than one global batch of " +
                           std::to_string(globalBatch) +
                           " (an evaluation runs the training step's batches" +
                           because + "); give at least " +
                           std::to_string(globalBatch) + " samples" +
                           (mse ? " (or compile with smpc --eval-predictions, "
                                  "which evaluates every sample of an mse "
                                  "loss)"
                                : ""));
  eval.batches = whole;
  eval.evaluated = whole * globalBatch;
  if (rest > 0)
    note += std::string(note.empty() ? "" : "\n") + "smprun: " + dir +
            " holds " + std::to_string(eval.samples) +
            " samples, not a multiple of the global batch of " +
            std::to_string(globalBatch) + ": each evaluation runs the first " +
            std::to_string(eval.evaluated) + " in " +
            std::to_string(eval.batches) + " batches and leaves the last " +
            std::to_string(rest) + " out (the step's batch is compiled in" +
            (noPad.empty() ? ""
                           : ", and a short batch cannot be padded: " + noPad) +
            ")" +
            (mse ? "; smpc --eval-predictions evaluates every sample of an "
                   "mse loss"
                 : "");
  return Status::success();
}

namespace {

/// Output `wanted` (an f32 scalar) of the forward just run; NaN when the
/// artifact has none.
double scalarOutput(const Executor &exec, const char *wanted) {
  for (const auto &[name, ref] : exec.outputs())
    if (name == wanted)
      return *ref.as<float>();
  return NAN;
}

/// An output gathered over an evaluation's batches: its real samples'
/// rows, and the shape of one.
struct Gathered {
  std::vector<float> values;
  std::vector<int64_t> row;
};

/// The rows [0, real) of the forward just run's predictions and labels,
/// appended to `predicted` and `labels`.
void addPredictions(const Executor &exec, int64_t real, Gathered &predicted,
                    Gathered &labels) {
  for (const auto &[name, ref] : exec.outputs()) {
    bool isPredicted = name == smp::base::kEvalPredictionsOutput;
    if (!isPredicted && name != smp::base::kEvalLabelIdsOutput)
      continue;
    Gathered &to = isPredicted ? predicted : labels;
    to.row.assign(ref.shape.begin() + 1, ref.shape.end());
    const float *rows = ref.as<float>();
    to.values.insert(to.values.end(), rows,
                     rows + real * (ref.numel() / ref.shape[0]));
  }
}

/// The mean of (predicted - target)^2 over every value.
double meanSquaredError(const std::vector<float> &predicted,
                        const std::vector<float> &target) {
  double sum = 0;
  for (size_t i = 0; i < predicted.size(); ++i) {
    double d = static_cast<double>(predicted[i]) - target[i];
    sum += d * d;
  }
  return predicted.empty() ? NAN : sum / static_cast<double>(predicted.size());
}

/// Writes an evaluation's predictions (after step `step`) and, unless
/// `labelsWritten`, the labels they were scored against into `dir`.
Status writePredictions(const std::string &dir, int64_t step,
                        Gathered &predicted, Gathered &labels,
                        bool labelsWritten) {
  for (auto [name, g] :
       {std::pair<std::string, Gathered *>{
            "predictions-step-" + std::to_string(step), &predicted},
        {"label_ids", &labels}}) {
    if (name == "label_ids" && labelsWritten)
      continue; // the labels input's, written at load
    int64_t per = 1;
    for (int64_t d : g->row)
      per *= d;
    std::vector<int64_t> shape{static_cast<int64_t>(g->values.size()) / per};
    shape.insert(shape.end(), g->row.begin(), g->row.end());
    smp::base::TensorRef t{g->values.data(), smp::base::DType::F32, shape};
    if (Status s = writeNpy(dir + "/" + name + ".npy", t); !s.ok())
      return Status::failure("--eval-predictions: " + s.error);
  }
  return Status::success();
}

/// Adds the eval_confusion output of the forward just run to `sums`
/// ([classes, classes]); `classes` is set from its shape.
void addConfusion(const Executor &exec, std::vector<double> &sums,
                  int64_t &classes) {
  for (const auto &[name, ref] : exec.outputs())
    if (name == smp::base::kEvalConfusionOutput) {
      classes = ref.rank() == 2 ? ref.shape[0] : 0;
      sums.resize(static_cast<size_t>(ref.numel()), 0.0);
      for (int64_t i = 0; i < ref.numel(); ++i)
        sums[i] += ref.as<float>()[i];
    }
}

} // namespace

Status evaluate(Executor &exec, Evaluation &eval, int64_t step, int64_t rank,
                int64_t batch, int64_t globalBatch, EvalRecord &rec) {
  auto start = std::chrono::steady_clock::now();
  double sum = 0, labels = 0;
  std::vector<double> confusion;
  int64_t classes = 0;
  std::vector<double> hits(eval.metrics.size(), 0.0); // the accuracies'
  Gathered predicted, predictedLabels;                // of the real samples
  bool wantsConfusion = std::any_of(
      eval.metrics.begin(), eval.metrics.end(),
      [](const std::string &m) { return smp::base::needsConfusion(m); });
  for (int64_t j = 0; j < eval.batches; ++j) {
    // Evaluation batch j: its samples in global batches, the last one
    // short and padded (the stream's next samples, their labels ignored).
    int64_t from = j * eval.batch,
            end = std::min(from + eval.batch, eval.evaluated);
    double counted = 0, weighted = 0, only = NAN;
    for (int64_t first = from; first < end; first += globalBatch) {
      BatchSlice slice{first, std::min(globalBatch, end - first),
                       eval.padLabels};
      Status s = feedBatch(exec, eval.data, 0, eval.samples, batch, globalBatch,
                           rank, eval.dir, &slice);
      // The scalars only steer the update and the dropout masks, which an
      // evaluation does not run.
      if (s.ok())
        s = feedStepScalars(exec, 0.0, step, 0);
      if (s.ok())
        s = exec.runForward();
      if (!s.ok())
        return Status::failure("evaluation after step " + std::to_string(step) +
                               ", batch " + std::to_string(j + 1) + " of " +
                               std::to_string(eval.batches) + ": " + s.error);
      only = scalarOutput(exec, "loss");
      // smpc --eval-accuracy, --eval-metrics: the global batch's labels,
      // each accuracy's hits, the confusion matrix.
      labels += scalarOutput(exec, smp::base::kEvalLabelsOutput);
      for (size_t m = 0; m < eval.metrics.size(); ++m)
        if (!eval.hitOutputs[m].empty())
          hits[m] += scalarOutput(exec, eval.hitOutputs[m].c_str());
      if (wantsConfusion)
        addConfusion(exec, confusion, classes);
      if (eval.predictions)
        addPredictions(exec, slice.real, predicted, predictedLabels);
      if (eval.sums)
        weighted += only;
      else if (!eval.counted
                    .empty()) { // the sum over the batch's counted labels
        int64_t n = 0;
        for (int64_t i = first; i < first + slice.real; ++i)
          n += eval.counted[i];
        if (n > 0)
          counted += static_cast<double>(n), weighted += only * n;
      }
    }
    double loss = eval.sums              ? weighted
                  : eval.counted.empty() ? only
                                         : weighted / counted;
    sum += loss * static_cast<double>(end - from);
  }
  rec.step = step;
  rec.loss = eval.hostLoss
                 ? meanSquaredError(predicted.values, predictedLabels.values)
                 : sum / static_cast<double>(eval.evaluated);
  // The labels: counted beside the accuracies, else the matrix's total,
  // else (a regression's) the targets the predictions are scored against.
  if (std::isnan(labels)) {
    labels = 0;
    for (double c : confusion)
      labels += c;
    if (confusion.empty())
      labels = static_cast<double>(predictedLabels.values.size());
  }
  rec.labels = static_cast<int64_t>(labels);
  rec.metrics.clear();
  // The correlations' input, in float64 (made once, where one is asked).
  std::vector<double> x, y;
  auto correlation = [&](const std::string &name) {
    if (x.empty()) {
      x.assign(predicted.values.begin(), predicted.values.end());
      y.assign(predictedLabels.values.begin(), predictedLabels.values.end());
    }
    return smp::base::predictionMetric(name, x.data(), y.data(),
                                       static_cast<int64_t>(x.size()));
  };
  for (size_t m = 0; m < eval.metrics.size(); ++m) {
    const std::string &name = eval.metrics[m];
    rec.metrics.push_back(
        {name, !eval.hitOutputs[m].empty() ? hits[m] / labels
               : smp::base::needsPredictions(name)
                   ? correlation(name)
                   : smp::base::evalMetric(name, confusion.data(), classes)});
  }
  if (!eval.predictionsDir.empty())
    if (Status s = writePredictions(eval.predictionsDir, step, predicted,
                                    predictedLabels, !eval.labelIds.empty());
        !s.ok())
      return s;
  rec.samples = eval.evaluated;
  rec.batches = eval.batches;
  rec.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return Status::success();
}

} // namespace smprt
