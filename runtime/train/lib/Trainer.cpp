//===- Trainer.cpp - The training loop of smprun --------------------------===//

#include "smprt/train/Trainer.h"

#include "TrainData.h"

#include "smprt/Base.h"
#include "smprt/train/Checkpoint.h"
#include "smprt/train/DataChecks.h"
#include "smprt/train/Progress.h"
#include "smprt/train/Schedule.h"
#include "smprt/train/Signals.h"

#include "smp/kernels/common/Elements.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <sys/stat.h>

namespace smprt {
namespace {

/// Tokens per sample: the non-batch dims of the first integer input of rank
/// >= 2 (token ids [batch, seq]); 0 for models without one.
int64_t tokensPerSample(const smp::artifact::Manifest &manifest) {
  for (const auto &spec : manifest.inputs()) {
    auto dtype = static_cast<DType>(spec.dtype());
    if (spec.name().empty() || spec.name()[0] == '@' || spec.shape_size() < 2 ||
        (dtype != DType::I64 && dtype != DType::I32))
      continue;
    int64_t n = 1;
    for (int i = 1; i < spec.shape_size(); ++i)
      n *= spec.shape(i);
    return n;
  }
  return 0;
}

/// When a step of this run (data positions [from, to), counted from where
/// the data (re)started at step `offset`) takes a batch across the end of
/// the samples, the note saying so: the samples are one repeating stream,
/// not epochs (PyTorch's DataLoader ends an epoch with a short batch, or
/// drops it). Empty otherwise.
std::string wrapNote(int64_t samples, int64_t globalBatch, int64_t from,
                     int64_t to, int64_t offset, const std::string &dataDir) {
  if (samples % globalBatch == 0)
    return "";
  // A straddle happens at least every samples / globalBatch + 1 positions.
  for (int64_t p = from; p < to; ++p) {
    int64_t start = streamSample(p, 0, samples, globalBatch);
    if (start + globalBatch <= samples)
      continue;
    int64_t tail = samples - start;
    return "smprun: " + dataDir + " holds " + std::to_string(samples) +
           " samples, not a multiple of the global batch of " +
           std::to_string(globalBatch) +
           ": the samples are read as one repeating stream, so step " +
           std::to_string(p + 1 + offset) + " takes the last " +
           std::to_string(tail) + " and then the first " +
           std::to_string(globalBatch - tail) +
           " again (PyTorch's DataLoader would end the epoch with a batch "
           "of " +
           std::to_string(tail) +
           ", or drop it with drop_last=True); give a multiple of " +
           std::to_string(globalBatch) + " samples for whole epochs";
  }
  return "";
}

/// Resumes the run when asked (Resume.h: the checkpoint checked against the
/// artifact) and sets this launch's learning-rate schedule: the artifact's
/// for a fresh run; the checkpoint's when resuming (refused when they
/// disagree). `record` is what this run's checkpoints record; `note` says
/// when the decay length comes from the checkpoint.
Status resumeRun(Executor &exec, const TrainOptions &options,
                 LrSchedule &schedule, RunRecord &record, int64_t &first,
                 std::string &note) {
  const auto &training = exec.artifact().manifest.training();
  schedule = LrSchedule::of(training, options.steps);
  record = runRecordOf(exec.artifact());
  first = 0;
  if (!options.resume)
    return Status::success();
  ResumeOptions ropts;
  ropts.resetOptimizer = options.resetOptimizer;
  ropts.resetData = options.resetData;
  ResumeInfo info;
  Status s = loadCheckpoint(exec, options.checkpointDir, ropts, info);
  if (!s.ok())
    return s;
  record = info.resumed;
  if (options.onNote) {
    for (const std::string &w : info.warnings)
      options.onNote(true, w);
    options.onNote(false, info.summary());
  }
  const std::string &ckpt = info.checkpoint;
  int64_t done = info.step;
  const auto &recorded = info.written.schedule;
  if (options.resetOptimizer) {
    // The rate, kind and warmup are the optimizer's settings the reset
    // accepts: the artifact's. A cosine decay keeps its length (the
    // artifact's --decay-steps, else the recorded cosine's; after a constant
    // rate, which has none, this launch's --steps) and the global step.
    bool recordedDecay = recorded && LrSchedule::decays(recorded->kind());
    schedule = LrSchedule::of(training, recordedDecay ? recorded->decay_steps()
                                                      : options.steps);
    if (recorded)
      schedule.skippedSteps = recorded->skipped_steps();
  } else if (!(s = resumedSchedule(training,
                                   recorded ? &*recorded : nullptr,
                                   info.totalSteps, ckpt, schedule))
                  .ok()) {
    return s;
  }
  if (done >= options.steps)
    return Status::failure(ckpt + ": the checkpoint has " +
                           std::to_string(done) +
                           " steps done already; ask for more --steps "
                           "(the total, not the steps to add)");
  if (LrSchedule::decays(schedule.kind) && training.decay_steps() == 0 &&
      schedule.decaySteps != options.steps)
    note = ("smprun: continuing the checkpoint's " + schedule.kind +
            " schedule, which ends its decay at step " +
            std::to_string(schedule.decaySteps) +
            " (the --steps of the run that started it; smpc --decay-steps sets "
            "the length up front)");
  first = done;
  return Status::success();
}

/// The ranks' agreement on a stop request (Signals.h), after every step:
/// they gather each rank's signal (0: none), arena high-water mark and
/// device memory in use, a 24-byte all-gather (16 bytes before the device
/// memory was added). Measured on this project's 2-core machine (2 ranks,
/// 1000 steps of test/fixtures/train/gpt dp=2 at ~1.6 ms a step, six
/// interleaved runs each): median 1.61 s with it, 1.60 s without, within
/// the runs' noise; the gather alone takes 3-9 us.
Status agreeOnStep(Communicator &comm, StepRecord &rec, int &stop) {
  int64_t mine[3] = {stopRequested(), static_cast<int64_t>(rec.peakBytes),
                     static_cast<int64_t>(rec.deviceBytes)};
  std::vector<int64_t> all(3 * static_cast<size_t>(comm.size()));
  Status s = comm.allGather(mine, all.data(), 3, DType::I64,
                            "the ranks' agreement on a stop request");
  if (!s.ok())
    return s;
  stop = 0;
  rec.peakBytesPerRank.clear();
  rec.deviceBytesPerRank.clear();
  for (int r = 0; r < comm.size(); ++r) {
    stop = std::max<int>(stop, static_cast<int>(all[3 * r]));
    rec.peakBytesPerRank.push_back(static_cast<uint64_t>(all[3 * r + 1]));
    rec.deviceBytesPerRank.push_back(static_cast<uint64_t>(all[3 * r + 2]));
  }
  return Status::success();
}

/// The step's record from the executor's outputs.
StepRecord recordOf(const Executor &exec, int64_t step, double lr) {
  StepRecord rec{step, NAN, lr, NAN, 0, exec.highWaterBytes()};
  uint64_t inUse = 0, total = 0;
  if (exec.backend().deviceMemory(inUse, total))
    rec.deviceBytes = inUse;
  for (const auto &[name, ref] : exec.outputs()) {
    if (name == "loss")
      rec.loss = *ref.as<float>();
    else if (name == "grad_norm")
      rec.gradNorm = *ref.as<float>();
    else if (name == "skipped")
      rec.skipped = *ref.as<float>() != 0;
    else if (name == "loss_scale")
      rec.lossScale = *ref.as<float>();
  }
  return rec;
}

/// The error of a step whose loss or gradient norm is not finite. Step 1
/// computes with the initial parameters, so the learning rate is not the
/// cause there.
Status nonFiniteError(const Executor &exec, const std::vector<Dataset> &data,
                      const std::string &loss, const StepRecord &rec) {
  std::string why = diagnoseNonFinite(data, loss);
  if (why.empty() && exec.finiteChecks())
    why = exec.firstInfinity().empty()
              ? "--check-finite: no instruction wrote NaN or infinity"
              : "--check-finite: no instruction wrote NaN; the first "
                "infinity: " +
                    exec.firstInfinity();
  else if (why.empty())
    why = std::string(rec.step == 1 ? "the learning rate has not acted yet: "
                                      "step 1 computes with the initial "
                                      "parameters"
                                    : "lower the learning rate or clip "
                                      "gradients with --clip-grad-norm") +
          "; rerun with --check-finite to name the first instruction "
          "that writes a NaN or an infinity";
  bool badLoss = !std::isfinite(rec.loss);
  return Status::failure("step " + std::to_string(rec.step) + ": the " +
                         (badLoss ? "loss" : "gradient norm") + " is " +
                         std::to_string(badLoss ? rec.loss : rec.gradNorm) +
                         "; stopping (" + why + ")");
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
      .count();
}

/// The samples of a run: its data, this rank's share of each global
/// batch, and the held-out samples of its evaluations.
struct RunData {
  std::vector<Dataset> data;
  int64_t samples = 0, batch = 0, rank = 0, globalBatch = 0;
  Evaluation eval;
  int64_t evalEvery = 0; // --eval-every, else the artifact's; 0: at the end
  // No evaluation before this many steps (the artifact's eval_delay, in
  // epochs of evalEvery steps under --eval-every epoch).
  double evalFrom = 0;
  std::string evalNote; // which held-out samples are left out, or none

  /// Whether held-out samples are evaluated after step `step` (1-based),
  /// `last` the run's last: every evalEvery steps and after the last, from
  /// evalFrom on (the Trainer evaluates at the end too, where eval_steps
  /// did not).
  bool evalDue(int64_t step, bool last) const {
    return !eval.dir.empty() && static_cast<double>(step) >= evalFrom &&
           ((evalEvery > 0 && step % evalEvery == 0) || last);
  }
};

/// The run's schedule of evaluations: --eval-every, else the artifact's
/// `recorded` (smpc --eval-every: K steps, or -1: every epoch of the
/// training data, N / G steps), which another --eval-every contradicts.
Status evalSchedule(int64_t recorded, double delay, const TrainOptions &options,
                    RunData &run) {
  std::string what =
      recorded < 0
          ? "every epoch of --data (smpc --eval-every epoch: the training "
            "arguments' eval_strategy \"epoch\")"
          : "every " + std::to_string(recorded) +
                " steps (smpc --eval-every, or the training arguments' "
                "eval_steps)";
  int64_t every = recorded;
  if (recorded < 0 && !options.evalDir.empty()) {
    if (run.samples % run.globalBatch != 0)
      return Status::failure(
          "the artifact evaluates " + what + ", but " + options.dataDir +
          "'s " + std::to_string(run.samples) +
          " samples are not whole global batches of " +
          std::to_string(run.globalBatch) +
          " (smprun reads them as one stream); give a multiple of " +
          std::to_string(run.globalBatch) +
          " samples, or compile without --eval-every epoch");
    every = run.samples / run.globalBatch;
    what += ", " + std::to_string(every) + " steps here";
  }
  if (options.evalEvery > 0 && recorded != 0 && options.evalEvery != every)
    return Status::failure(
        "--eval-every " + std::to_string(options.evalEvery) +
        " contradicts the artifact's evaluation " + what + "; leave it out" +
        (every > 0 ? " (or give --eval-every " + std::to_string(every) + ")"
                   : std::string()));
  run.evalEvery = options.evalEvery > 0 ? options.evalEvery : every;
  run.evalFrom = delay * static_cast<double>(recorded < 0 ? every : 1);
  if (options.evalDir.empty() && recorded != 0)
    run.evalNote = "smprun: the artifact evaluates " + what +
                   ", but no held-out samples are given: nothing is "
                   "evaluated; give them with --eval-data DIR";
  return Status::success();
}

/// The checks of a data directory for what would train another model
/// (DataChecks.h), but those the options accept.
Status checkData(const Artifact &artifact, const TrainOptions &options,
                 const std::string &dir) {
  if (!options.allowCopiedLabels)
    if (Status s = checkLabelsNotCopied(artifact, dir, "--allow-copied-labels");
        !s.ok())
      return s;
  if (!options.ignoreUnreadData)
    return checkUnreadInputs(artifact, dir, "--ignore-unread-data");
  return Status::success();
}

Status loadRunData(const Executor &exec, const TrainOptions &options,
                   RunData &run) {
  const Artifact &artifact = exec.artifact();
  std::vector<Dataset> &data = run.data;
  int64_t &samples = run.samples, &batch = run.batch, &rank = run.rank,
          &globalBatch = run.globalBatch;
  if (Status s = loadDatasets(exec, options.dataDir, "training", options.onNote,
                              data, samples, batch);
      !s.ok())
    return s;
  if (Status s = checkData(artifact, options, options.dataDir); !s.ok())
    return s;
  // Data parallel: each rank reads its share of the global batch (ranks of
  // one pipeline or tensor-parallel group read the same share).
  const auto &program = artifact.program;
  Communicator &comm = exec.communicator();
  rank = program.data_shards() ? program.data_shard() : comm.rank();
  int64_t shards = program.data_shards() ? program.data_shards() : comm.size();
  if (rank < 0 || rank >= shards || !checkedMul(batch, shards, globalBatch))
    return Status::failure(
        artifact.dir + ": data shard " + std::to_string(rank) + " of " +
        std::to_string(shards) + " with batches of " + std::to_string(batch) +
        " (the artifact is inconsistent; recompile it)");
  if (samples < globalBatch)
    return Status::failure(
        options.dataDir + ": holds " + std::to_string(samples) +
        " samples, fewer than one global batch of " +
        std::to_string(globalBatch) +
        " (every step would train on repeated samples); give at least " +
        std::to_string(globalBatch) +
        " samples or compile a smaller "
        "--batch-size");

  if (Status s =
          evalSchedule(artifact.manifest.training().eval_every(),
                       artifact.manifest.training().eval_delay(), options, run);
      !s.ok() || options.evalDir.empty())
    return s;
  if (Status s = loadEvaluation(exec, options.evalDir, options.onNote,
                                globalBatch, run.eval, run.evalNote);
      !s.ok())
    return s;
  if (Status s = checkData(artifact, options, options.evalDir); !s.ok())
    return s;
  return loadPredictions(exec, options.evalPredictionsDir, options.report,
                         run.eval);
}

} // namespace

double learningRate(const smp::artifact::TrainingConfig &config, int64_t k,
                    int64_t total) {
  return LrSchedule::of(config, total).rate(k);
}

Status train(Executor &exec, const TrainOptions &options,
             std::vector<StepRecord> &records, TrainStop *stop) {
  const Artifact &artifact = exec.artifact();
  const auto &manifest = artifact.manifest;
  if (!manifest.has_training())
    return Status::failure(artifact.dir + ": not a training artifact; compile "
                                          "it with smpc compile --train");
  RunData run;
  if (Status s = loadRunData(exec, options, run); !s.ok())
    return s;
  std::vector<Dataset> &data = run.data;
  const int64_t samples = run.samples, batch = run.batch, rank = run.rank,
                globalBatch = run.globalBatch;
  Communicator &comm = exec.communicator();

  // What a killed run or a full disk left of an unfinished save.
  if (!options.checkpointDir.empty() && comm.rank() == 0)
    removeStaleCheckpointTemps(options.checkpointDir);
  bool reports = options.report;
  RunFacts facts;
  facts.totalSteps = options.steps;
  facts.globalBatch = globalBatch;
  facts.tokensPerSample = tokensPerSample(manifest);
  facts.stepFlops = manifest.step_flops();
  // The "cpu" preset's peak is one core's: a rank computes on its threads.
  facts.peakFlops =
      manifest.peak_flops() *
      (manifest.device() == "cpu" ? exec.backend().computeUnits() : 1);
  facts.numRanks = comm.size();
  LrSchedule schedule;
  int64_t first = 0;
  std::string note;
  RunRecord record;
  if (Status s = resumeRun(exec, options, schedule, record, first, note);
      !s.ok())
    return s;
  schedule.to(record.schedule.emplace());
  facts.firstStep = first;
  Reporter reporter(facts, reports ? options.progress : ProgressMode::None,
                    options.logEvery, reports);
  if (reports && !note.empty())
    reporter.note(note);
  if (reports && !run.evalNote.empty())
    reporter.note(run.evalNote);
  if (reports) {
    std::string wrap =
        wrapNote(samples, globalBatch, first - record.dataStartStep,
                 options.steps - record.dataStartStep, record.dataStartStep,
                 options.dataDir);
    if (!wrap.empty())
      reporter.note(wrap);
  }
  Status status;
  if (reports && !options.metricsPath.empty())
    status = reporter.openMetrics(options.metricsPath, first > 0);
  if (status.ok() && reports && !options.tensorboardDir.empty())
    status = reporter.openTensorBoard(options.tensorboardDir);
  if (!status.ok())
    return status;
  auto start = std::chrono::steady_clock::now();
  // A step's wall-clock time is this plus its elapsed time: one clock read
  // per step, so "time" and "elapsed" in the metrics agree exactly.
  const double startWall = std::chrono::duration<double>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  auto evaluateAt = [&](int64_t step) {
    EvalRecord er;
    Status s = evaluate(exec, run.eval, step, rank, batch, globalBatch, er);
    er.wallTime = startWall + secondsSince(start);
    return s.ok() ? reporter.evaluation(er) : s;
  };
  // The Trainer's eval_on_start: the parameters as the run starts (not
  // again when it resumes).
  if (first == 0 && !run.eval.dir.empty() &&
      manifest.training().eval_on_start())
    status = evaluateAt(0);
  for (int64_t k = first; status.ok() && k < options.steps; ++k) {
    auto stepStart = std::chrono::steady_clock::now();
    // The data position counts from where it (re)started (--reset-data).
    if (!(status = feedBatch(exec, data, k - record.dataStartStep, samples,
                             batch, globalBatch, rank, options.dataDir))
             .ok())
      break;
    double lr = schedule.rateOf(k);
    if (!(status = feedStepScalars(exec, lr, k, record.optimizerStartStep))
             .ok())
      break;
    if (!(status = exec.run()).ok()) {
      status = Status::failure("step " + std::to_string(k + 1) + ": " +
                               status.error);
      break;
    }
    StepRecord rec = recordOf(exec, k + 1, lr);
    rec.seconds = secondsSince(stepStart);
    rec.elapsed = secondsSince(start);
    int stopSignal = 0;
    if (!(status = agreeOnStep(comm, rec, stopSignal))
             .ok())
      break;
    rec.wallTime = startWall + rec.elapsed;
    rec.samplesPerSecond = globalBatch / std::max(rec.seconds, 1e-9);
    records.push_back(rec);
    if (options.afterStep)
      options.afterStep(k + 1);
    if (rec.skipped && LrSchedule::skipsOverflows(schedule.kind))
      record.schedule->set_skipped_steps(++schedule.skippedSteps);
    if (!(status = reporter.step(rec)).ok())
      break;
    bool due = options.checkpointEvery > 0
                   ? (k + 1) % options.checkpointEvery == 0
                   : !options.checkpointDir.empty() && k + 1 == options.steps;
    // A stop request saves the step it finished (unless just saved).
    bool stopping = stopSignal != 0 && k + 1 < options.steps;
    if (!stopping && (std::isfinite(rec.loss) || rec.skipped) &&
        run.evalDue(k + 1, k + 1 == options.steps) &&
        !(status = evaluateAt(k + 1)).ok())
      break;
    std::string written;
    if ((due || (stopping && !options.checkpointDir.empty())) &&
        std::isfinite(rec.loss) &&
        !(status = saveCheckpoint(exec, options.checkpointDir, k + 1,
                                  options.steps, record, written))
             .ok())
      break;
    // With loss scaling an overflow skips the step and backs the scale off.
    if (!rec.skipped &&
        (!std::isfinite(rec.loss) || !std::isfinite(rec.gradNorm))) {
      status = nonFiniteError(exec, data, manifest.training().loss(), rec);
      break;
    }
    if (stopping) {
      if (stop) {
        stop->signal = stopSignal;
        stop->step = k + 1;
        stop->checkpoint = written;
      }
      break;
    }
  }
  reporter.finish();
  return status;
}

} // namespace smprt
