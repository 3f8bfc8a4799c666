//===- Trainer.cpp - The training loop of smprun --------------------------===//

#include "smprt/train/Trainer.h"

#include "smprt/Base.h"
#include "smprt/train/Checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sys/stat.h>

namespace smprt {
namespace {

/// One data tensor: all samples of a graph input.
struct Dataset {
  std::string name;
  NpyArray samples;
  TensorRef batch; // the compiled input's dtype and shape
  std::string batchBytes;
};

/// A JSON number, or null for inf/NaN (which JSON cannot hold).
std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string formatDuration(double seconds) {
  long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60,
           s % 60);
  return buf;
}

/// Whether element k of a float tensor is NaN or infinite (false for other
/// dtypes).
bool nonFinite(const TensorRef &t, int64_t k) {
  const char *p = static_cast<const char *>(t.data);
  switch (t.dtype) {
  case DType::F32: {
    float v;
    std::memcpy(&v, p + 4 * k, 4);
    return !std::isfinite(v);
  }
  case DType::F64: {
    double v;
    std::memcpy(&v, p + 8 * k, 8);
    return !std::isfinite(v);
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t bits;
    std::memcpy(&bits, p + 2 * k, 2);
    uint16_t exp = t.dtype == DType::F16 ? 0x7c00 : 0x7f80;
    return (bits & exp) == exp;
  }
  default:
    return false;
  }
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
    int64_t n = d.batch.numel();
    for (int64_t k = 0; k < n; ++k)
      if (nonFinite(d.batch, k))
        return "input '" + d.name + "' holds NaN or Inf values in this " +
               "step's batch; clean the data";
    if (d.name == labels && d.batch.dtype == DType::I64 && n > 0) {
      const auto *v = static_cast<const int64_t *>(d.batch.data);
      if (std::all_of(v, v + n, [](int64_t x) { return x == -100; }))
        return "every label of input '" + d.name +
               "' in this step's batch is the ignore index -100, so the "
               "mean loss is 0/0; give samples with labels to learn from";
    }
  }
  return "";
}

} // namespace

double learningRate(const smp::artifact::TrainingConfig &config, int64_t k,
                    int64_t total) {
  double lr = config.lr();
  int64_t warmup = config.warmup_steps();
  if (k < warmup)
    return lr * static_cast<double>(k + 1) / static_cast<double>(warmup);
  if (config.lr_schedule() == "cosine") {
    double span = static_cast<double>(std::max<int64_t>(1, total - warmup));
    double progress = static_cast<double>(k - warmup) / span;
    return lr * 0.5 * (1.0 + std::cos(M_PI * progress));
  }
  return lr;
}

Status train(Executor &exec, const TrainOptions &options,
             std::vector<StepRecord> &records) {
  const Artifact &artifact = exec.artifact();
  const auto &manifest = artifact.manifest;
  if (!manifest.has_training())
    return Status::failure(artifact.dir + ": not a training artifact; compile "
                                          "it with smpc compile --train");
  // Load every data input and check it against the compiled batch.
  std::vector<Dataset> data;
  int64_t samples = -1, batch = -1;
  bool anyDataInput = false;
  for (const auto &spec : manifest.inputs()) {
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
    Status s = readNpy(path, d.samples);
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
    if (d.samples.dtype != d.batch.dtype || d.samples.shape.empty() ||
        std::vector<int64_t>(d.samples.shape.begin() + 1,
                             d.samples.shape.end()) != perSample ||
        d.samples.shape[0] < 1)
      return Status::failure(
          path + ": input '" + d.name + "' is " + describe(d.samples.ref()) +
          "; training expects N samples of " +
          describe(TensorRef{nullptr, d.batch.dtype, perSample}) +
          " (batches of " + std::to_string(d.batch.shape[0]) + ")");
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
    d.batch.data = d.batchBytes.data();
    data.push_back(std::move(d));
  }
  if (!anyDataInput)
    return Status::failure(artifact.dir + ": the model has no data inputs");
  // Data parallel: each rank reads its share of the global batch (ranks of
  // one pipeline or tensor-parallel group read the same share).
  const auto &program = artifact.program;
  int64_t rank =
      program.data_shards() ? program.data_shard() : exec.communicator().rank();
  int64_t shards = program.data_shards() ? program.data_shards()
                                         : exec.communicator().size();
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
  if (!options.checkpointDir.empty() && exec.communicator().rank() == 0)
    removeStaleCheckpointTemps(options.checkpointDir);
  int64_t first = 0;
  // What the checkpoints of this run record (the start steps of the
  // optimizer state and the data position carry over from a resume).
  RunRecord record = runRecordOf(artifact);
  if (options.resume) {
    ResumeOptions ropts;
    ropts.resetOptimizer = options.resetOptimizer;
    ropts.resetData = options.resetData;
    ResumeInfo info;
    Status s = loadCheckpoint(exec, options.checkpointDir, ropts, info);
    if (!s.ok())
      return s;
    int64_t done = info.step, total = info.totalSteps;
    record = info.resumed;
    if (options.report) {
      for (const std::string &w : info.warnings)
        options.report(true, w);
      options.report(false, info.summary());
    }
    if (total != options.steps &&
        manifest.training().lr_schedule() != "constant")
      return Status::failure(options.checkpointDir +
                             ": the checkpoint was written for a run of " +
                             std::to_string(total) + " steps; the " +
                             manifest.training().lr_schedule() +
                             " schedule needs the same --steps to continue");
    if (done >= options.steps)
      return Status::failure(options.checkpointDir + ": the checkpoint has " +
                             std::to_string(done) +
                             " steps done already; ask for more --steps");
    first = done;
  }
  FILE *metrics = nullptr;
  if (!options.metricsPath.empty()) {
    metrics = std::fopen(options.metricsPath.c_str(), first ? "a" : "w");
    if (!metrics)
      return Status::failure(options.metricsPath + ": cannot write");
  }
  float lrValue = 0, stepValue = 0;
  TensorRef lrRef{&lrValue, DType::F32, {}},
      stepRef{&stepValue, DType::F32, {}};
  auto start = std::chrono::steady_clock::now();
  Status status;
  for (int64_t k = first; k < options.steps; ++k) {
    auto stepStart = std::chrono::steady_clock::now();
    for (Dataset &d : data) {
      size_t rowBytes = d.batch.bytes() / batch;
      for (int64_t i = 0; i < batch; ++i) {
        // Data parallel: rank r takes its share of the global batch.
        // Modulo samples at each term: k * globalBatch overflows int64
        // for a long enough run (globalBatch <= samples here).
        int64_t sample =
            static_cast<int64_t>(((static_cast<unsigned __int128>(
                                       (k - record.dataStartStep) % samples) *
                                       static_cast<uint64_t>(globalBatch) +
                                   static_cast<uint64_t>(rank * batch + i)) %
                                  static_cast<uint64_t>(samples)));
        std::memcpy(d.batchBytes.data() + i * rowBytes,
                    d.samples.bytes.data() + sample * rowBytes, rowBytes);
      }
      if (!(status = exec.setInput(d.name, d.batch, options.dataDir)).ok())
        break;
    }
    if (!status.ok())
      break;
    double lr = learningRate(manifest.training(), k, options.steps);
    lrValue = static_cast<float>(lr);
    // The optimizer's own step count (Adam's bias correction, SGD's first
    // momentum step): from where its state started.
    stepValue = static_cast<float>(k + 1 - record.optimizerStartStep);
    if ((exec.hasInput("@lr") &&
         !(status = exec.setInput("@lr", lrRef, "trainer")).ok()) ||
        (exec.hasInput("@step") &&
         !(status = exec.setInput("@step", stepRef, "trainer")).ok()))
      break;
    if (!(status = exec.run()).ok()) {
      status = Status::failure("step " + std::to_string(k + 1) + ": " +
                               status.error);
      break;
    }
    StepRecord rec{k + 1, NAN, lr, NAN, 0, exec.highWaterBytes()};
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
    double stepSeconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - stepStart)
                             .count();
    rec.samplesPerSecond = globalBatch / std::max(stepSeconds, 1e-9);
    records.push_back(rec);
    if (metrics) {
      std::string scaling;
      if (rec.lossScale > 0)
        scaling = ", \"loss_scale\": " + jsonNumber(rec.lossScale) +
                  ", \"skipped\": " + (rec.skipped ? "true" : "false");
      std::fprintf(metrics,
                   "{\"step\": %lld, \"loss\": %s, \"lr\": %s, "
                   "\"grad_norm\": %s, \"samples_per_s\": %.6g, "
                   "\"peak_bytes\": %llu%s}\n",
                   static_cast<long long>(rec.step),
                   jsonNumber(rec.loss).c_str(), jsonNumber(rec.lr).c_str(),
                   jsonNumber(rec.gradNorm).c_str(), rec.samplesPerSecond,
                   static_cast<unsigned long long>(rec.peakBytes),
                   scaling.c_str());
      std::fflush(metrics);
    }
    if (options.progress) {
      double elapsed = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      double eta = elapsed / (k + 1 - first) * (options.steps - k - 1);
      std::fprintf(stderr,
                   "\rstep %lld/%lld  loss %.6f  lr %.3g  %.1f samples/s  "
                   "ETA %s ",
                   static_cast<long long>(k + 1),
                   static_cast<long long>(options.steps), rec.loss, rec.lr,
                   rec.samplesPerSecond, formatDuration(eta).c_str());
      std::fflush(stderr);
    }
    bool due = options.checkpointEvery > 0
                   ? (k + 1) % options.checkpointEvery == 0
                   : !options.checkpointDir.empty() && k + 1 == options.steps;
    if (due && std::isfinite(rec.loss)) {
      std::string written;
      status = saveCheckpoint(exec, options.checkpointDir, k + 1, options.steps,
                              record, written);
      if (!status.ok())
        break;
    }
    // With loss scaling an overflow skips the step and backs the scale off.
    if (rec.skipped)
      continue;
    if (!std::isfinite(rec.loss) || !std::isfinite(rec.gradNorm)) {
      std::string why = diagnoseNonFinite(data, manifest.training().loss());
      if (why.empty())
        why = "lower the learning rate or clip gradients with "
              "--clip-grad-norm";
      status = Status::failure(
          "step " + std::to_string(k + 1) + ": the " +
          (!std::isfinite(rec.loss) ? "loss" : "gradient norm") + " is " +
          std::to_string(!std::isfinite(rec.loss) ? rec.loss : rec.gradNorm) +
          "; stopping (" + why + ")");
      break;
    }
  }
  if (options.progress)
    std::fprintf(stderr, "\n");
  if (metrics)
    std::fclose(metrics);
  return status;
}

} // namespace smprt
