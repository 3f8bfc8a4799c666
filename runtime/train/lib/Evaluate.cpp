//===- Evaluate.cpp - The loss of held-out samples (smprun --eval-data) ---===//
//
// An evaluation runs the training step's forward (the instructions marked
// `forward`: what the "loss" output is computed from) with dropout off on
// each global batch of the held-out samples, and averages the batches'
// losses weighted by their samples, as the Hugging Face Trainer's
// evaluation loop does. A short last batch is padded to the global batch
// with held-out samples whose labels are -100 (a cross-entropy mean
// leaves them out: TrainingConfig.eval_pad_labels), else left out. The
// parameters and the optimizer's state are only read.
//
//===----------------------------------------------------------------------===//

#include "TrainData.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace smprt {

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
  int64_t whole = eval.samples / globalBatch,
          rest = eval.samples - whole * globalBatch;
  if (!eval.padLabels.empty()) {
    eval.batches = whole + (rest > 0 ? 1 : 0);
    eval.evaluated = eval.samples;
    return Status::success();
  }
  std::string because =
      noPad.empty() ? std::string() : " and cannot pad a short one: " + noPad;
  if (whole == 0)
    return Status::failure(dir + ": holds " + std::to_string(eval.samples) +
                           " samples, fewer than one global batch of " +
                           std::to_string(globalBatch) +
                           " (an evaluation runs the training step's batches" +
                           because + "); give at least " +
                           std::to_string(globalBatch) + " samples");
  eval.batches = whole;
  eval.evaluated = whole * globalBatch;
  if (rest > 0)
    note = "smprun: " + dir + " holds " + std::to_string(eval.samples) +
           " samples, not a multiple of the global batch of " +
           std::to_string(globalBatch) + ": each evaluation runs the first " +
           std::to_string(eval.evaluated) + " in " +
           std::to_string(eval.batches) + " batches and leaves the last " +
           std::to_string(rest) + " out (the step's batch is compiled in" +
           (noPad.empty() ? ""
                          : ", and a short batch cannot be padded: " + noPad) +
           ")";
  return Status::success();
}

Status evaluate(Executor &exec, Evaluation &eval, int64_t step, int64_t rank,
                int64_t batch, int64_t globalBatch, EvalRecord &rec) {
  auto start = std::chrono::steady_clock::now();
  double sum = 0;
  for (int64_t j = 0; j < eval.batches; ++j) {
    // The short last batch: the rest of the samples, then padding (the
    // stream's first samples again) with ignored labels.
    int64_t real = std::min(globalBatch, eval.samples - j * globalBatch);
    BatchPadding pad{eval.padLabels, real};
    Status s = feedBatch(exec, eval.data, j, eval.samples, batch, globalBatch,
                         rank, eval.dir, real < globalBatch ? &pad : nullptr);
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
    double loss = NAN;
    for (const auto &[name, ref] : exec.outputs())
      if (name == "loss")
        loss = *ref.as<float>();
    sum += loss * static_cast<double>(real);
  }
  rec.step = step;
  rec.loss = sum / static_cast<double>(eval.evaluated);
  rec.samples = eval.evaluated;
  rec.batches = eval.batches;
  rec.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return Status::success();
}

} // namespace smprt
