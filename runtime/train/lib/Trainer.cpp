//===- Trainer.cpp - The training loop of smprun --------------------------===//

#include "smprt/train/Trainer.h"

#include "smprt/Base.h"
#include "smprt/train/Checkpoint.h"
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

/// One data tensor: all samples of a graph input.
struct Dataset {
  std::string name;
  NpyArray samples;
  TensorRef batch; // the compiled input's dtype and shape; no data
  std::string batchBytes;

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

/// For samples of the right shape and another dtype: how to convert them
/// (numpy's name for the dtype training expects).
std::string convertHint(const NpyArray &samples, DType want,
                        const std::vector<int64_t> &perSample,
                        const std::string &path) {
  if (samples.shape.empty() ||
      std::vector<int64_t>(samples.shape.begin() + 1, samples.shape.end()) !=
          perSample)
    return "";
  const char *np = want == DType::F32    ? "float32"
                   : want == DType::F16  ? "float16"
                   : want == DType::BF16 ? "float32" // rounded as fed
                   : want == DType::F64  ? "float64"
                   : want == DType::I64  ? "int64"
                   : want == DType::I32  ? "int32"
                                         : nullptr;
  if (!np)
    return "";
  return std::string("; convert it (numpy: np.save('") + path + "', np.load('" +
         path + "').astype(np." + np + ")))";
}

/// Why the loss of this step is not finite, when the data says so: a batch
/// of an input holding NaN or Inf, or a batch whose every cross-entropy
/// label is the ignore index (the mean over no labels is 0/0). Empty when
/// the data looks fine.
std::string diagnoseNonFinite(const std::vector<Dataset> &data,
                              const std::string &loss) {
  std::string labels;
  if (loss.rfind("cross_entropy:", 0) == 0)
    labels = loss.substr(loss.rfind(':') + 1);
  for (const Dataset &d : data) {
    TensorRef batch = d.batchRef();
    int64_t n = batch.numel();
    for (int64_t k = 0; k < n; ++k)
      if (nonFinite(batch, k))
        return "input '" + d.name + "' holds NaN or Inf values in this " +
               "step's batch; clean the data";
    if (d.name == labels && d.batch.dtype == DType::I64 && n > 0) {
      const auto *v = static_cast<const int64_t *>(batch.data);
      if (std::all_of(v, v + n, [](int64_t x) { return x == -100; }))
        return "every label of input '" + d.name +
               "' in this step's batch is the ignore index -100, so the "
               "mean loss is 0/0; give samples with labels to learn from";
    }
  }
  return "";
}

/// Integer samples of another integer dtype than the model's input (token
/// ids saved as uint16 or int32 for an int64 input) are converted batch by
/// batch as they are fed (feedBatch), so training sees the same numbers and
/// the samples keep their own size in memory; this checks up front that
/// every value fits, naming the first one that does not.
Status checkIntegerSamples(const NpyArray &a, DType to, const std::string &path,
                           const std::string &name) {
  auto refuse = [&](const std::string &value, int64_t i) {
    return Status::failure(path + ": input '" + name + "' holds " + value +
                           " at element " + std::to_string(i) + ", which " +
                           dtypeName(to) +
                           " (the model's input) cannot hold; save the "
                           "samples as " +
                           dtypeName(to));
  };
  int64_t n = 1;
  for (int64_t d : a.shape)
    n *= d;
  for (int64_t i = 0; i < n; ++i) {
    if (a.dtype == DType::U64) { // loadIndex saturates these
      uint64_t raw;
      std::memcpy(&raw, a.data() + i * sizeof(raw), sizeof(raw));
      if (raw > static_cast<uint64_t>(INT64_MAX))
        return refuse(std::to_string(raw), i);
    }
    int64_t v = smp::kernels::common::loadIndex(a.data(), a.dtype, i);
    if (to == DType::I32 && (v < INT32_MIN || v > INT32_MAX))
      return refuse(std::to_string(v), i);
  }
  return Status::success();
}

/// Loads every data input this rank reads and checks it against the
/// compiled batch: `samples` per input, `batch` per step on this rank.
Status loadDatasets(const Executor &exec, const TrainOptions &options,
                    std::vector<Dataset> &data, int64_t &samples,
                    int64_t &batch) {
  const Artifact &artifact = exec.artifact();
  samples = -1, batch = -1;
  bool anyDataInput = false;
  for (const auto &spec : artifact.manifest.inputs()) {
    if (!spec.name().empty() && spec.name()[0] == '@')
      continue; // fed by the trainer
    anyDataInput = true;
    if (!exec.hasInput(spec.name()))
      continue; // another pipeline stage reads it
    Dataset d;
    d.name = spec.name();
    std::string path = options.dataDir + "/" + fileNameFor(d.name) + ".npy";
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return Status::failure(path + ": missing; training needs input '" +
                             d.name + "' as a .npy file of samples");
    // Mapped: a corpus larger than memory trains; batches page it in.
    Status s = readNpy(path, d.samples, /*map=*/true);
    if (!s.ok())
      return s;
    d.batch.dtype = static_cast<DType>(spec.dtype());
    d.batch.shape.assign(spec.shape().begin(), spec.shape().end());
    if (d.batch.shape.empty())
      return Status::failure(path + ": input '" + d.name +
                             "' is a scalar; training data needs a leading "
                             "sample dim");
    std::vector<int64_t> perSample(d.batch.shape.begin() + 1,
                                   d.batch.shape.end());
    bool converted = d.samples.dtype != d.batch.dtype &&
                     isInteger(d.samples.dtype) &&
                     (d.batch.dtype == DType::I64 || d.batch.dtype == DType::I32);
    if (converted &&
        !(s = checkIntegerSamples(d.samples, d.batch.dtype, path, d.name)).ok())
      return s;
    if (roundsTo(d.samples.dtype, d.batch.dtype)) {
      converted = true;
      if (options.onNote)
        options.onNote(
            false, "note: " + roundingNote(path + " (input '" + d.name + "')",
                                           d.batch.dtype));
    }
    if ((d.samples.dtype != d.batch.dtype && !converted) ||
        d.samples.shape.empty() ||
        std::vector<int64_t>(d.samples.shape.begin() + 1,
                             d.samples.shape.end()) != perSample ||
        d.samples.shape[0] < 1)
      return Status::failure(
          path + ": input '" + d.name + "' is " + describe(d.samples.ref()) +
          "; training expects N samples of " +
          describe(TensorRef{nullptr, d.batch.dtype, perSample}) +
          " (batches of " + std::to_string(d.batch.shape[0]) + ")" +
          convertHint(d.samples, d.batch.dtype, perSample, path));
    if (samples >= 0 && d.samples.shape[0] != samples)
      return Status::failure(
          path + ": holds " + std::to_string(d.samples.shape[0]) +
          " samples, other inputs hold " + std::to_string(samples));
    if (d.batch.shape[0] < 1)
      return Status::failure(artifact.dir + ": input '" + d.name +
                             "' has a batch of 0 samples (the artifact is "
                             "inconsistent; recompile it)");
    if (batch >= 0 && d.batch.shape[0] != batch)
      return Status::failure(artifact.dir + ": input '" + d.name +
                             "' has a batch of " +
                             std::to_string(d.batch.shape[0]) +
                             " samples, other inputs " + std::to_string(batch) +
                             " (the artifact is inconsistent; recompile it)");
    samples = d.samples.shape[0];
    batch = d.batch.shape[0];
    d.batchBytes.resize(d.batch.bytes());
    data.push_back(std::move(d));
  }
  if (!anyDataInput)
    return Status::failure(artifact.dir + ": the model has no data inputs");
  return Status::success();
}

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

/// The index among the `samples` of the `j`-th sample of data position
/// `k`'s global batch: the samples are one repeating stream. Modulo samples
/// at each term: k * globalBatch overflows int64 for a long enough run
/// (globalBatch <= samples here).
int64_t streamSample(int64_t k, int64_t j, int64_t samples,
                     int64_t globalBatch) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(k % samples) *
                                   static_cast<uint64_t>(globalBatch) +
                               static_cast<uint64_t>(j)) %
                              static_cast<uint64_t>(samples));
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

/// Copies step `k`'s batch of every input into `data` and feeds it.
Status feedBatch(Executor &exec, std::vector<Dataset> &data, int64_t k,
                 int64_t samples, int64_t batch, int64_t globalBatch,
                 int64_t rank, const std::string &dataDir) {
  for (Dataset &d : data) {
    size_t rowBytes = d.batch.bytes() / batch;
    for (int64_t i = 0; i < batch; ++i) {
      // Data parallel: rank r takes its share of the global batch.
      int64_t sample = streamSample(k, rank * batch + i, samples, globalBatch);
      char *dst = d.batchBytes.data() + i * rowBytes;
      if (d.samples.dtype == d.batch.dtype) {
        std::memcpy(dst, d.samples.data() + sample * rowBytes, rowBytes);
        continue;
      }
      size_t esize = dtypeSize(d.batch.dtype);
      int64_t rowElems = static_cast<int64_t>(rowBytes / esize);
      if (roundsTo(d.samples.dtype, d.batch.dtype)) {
        convertFloats(d.samples.data() +
                          sample * rowElems * dtypeSize(d.samples.dtype),
                      d.samples.dtype, dst, d.batch.dtype, rowElems);
        continue;
      }
      // Integer samples of another dtype (checkIntegerSamples).
      for (int64_t j = 0; j < rowElems; ++j) {
        int64_t v = smp::kernels::common::loadIndex(
            d.samples.data(), d.samples.dtype, sample * rowElems + j);
        if (d.batch.dtype == DType::I32) {
          int32_t w = static_cast<int32_t>(v);
          std::memcpy(dst + j * esize, &w, sizeof(w));
        } else {
          std::memcpy(dst + j * esize, &v, sizeof(v));
        }
      }
    }
    if (Status s = exec.setInput(d.name, d.batchRef(), dataDir); !s.ok())
      return s;
  }
  return Status::success();
}

/// Step k's scalars: the learning rate, the optimizer's own step count
/// (Adam's bias correction, SGD's first momentum step: from where its state
/// started) and what the dropout masks are drawn from (the seed, k).
Status feedStepScalars(Executor &exec, double lr, int64_t k,
                       int64_t optimizerStartStep) {
  float lrValue = static_cast<float>(lr);
  float stepValue = static_cast<float>(k + 1 - optimizerStartStep);
  TensorRef lrRef{&lrValue, DType::F32, {}},
      stepRef{&stepValue, DType::F32, {}};
  exec.setRandomState(exec.artifact().manifest.training().seed(),
                      static_cast<uint64_t>(k));
  Status status;
  if (exec.hasInput("@lr") &&
      !(status = exec.setInput("@lr", lrRef, "trainer")).ok())
    return status;
  if (exec.hasInput("@step"))
    status = exec.setInput("@step", stepRef, "trainer");
  return status;
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
  std::vector<Dataset> data;
  int64_t samples, batch;
  if (Status s = loadDatasets(exec, options, data, samples, batch); !s.ok())
    return s;
  // Data parallel: each rank reads its share of the global batch (ranks of
  // one pipeline or tensor-parallel group read the same share).
  const auto &program = artifact.program;
  Communicator &comm = exec.communicator();
  int64_t rank = program.data_shards() ? program.data_shard() : comm.rank();
  int64_t shards = program.data_shards() ? program.data_shards() : comm.size();
  int64_t globalBatch;
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
  for (int64_t k = first; k < options.steps; ++k) {
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
    if (rec.skipped && LrSchedule::skipsOverflows(schedule.kind))
      record.schedule->set_skipped_steps(++schedule.skippedSteps);
    if (!(status = reporter.step(rec)).ok())
      break;
    bool due = options.checkpointEvery > 0
                   ? (k + 1) % options.checkpointEvery == 0
                   : !options.checkpointDir.empty() && k + 1 == options.steps;
    // A stop request saves the step it finished (unless just saved).
    bool stopping = stopSignal != 0 && k + 1 < options.steps;
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
