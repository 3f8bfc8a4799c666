//===- Data.cpp - The samples a run feeds ---------------------------------===//

#include "TrainData.h"

#include "smprt/train/DataChecks.h"

#include "smp/kernels/common/Elements.h"

#include <algorithm>
#include <cstring>
#include <sys/stat.h>

namespace smprt {
namespace {

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
  std::string hint = std::string("; convert it (numpy: np.save('") + path +
                     "', np.load('" + path + "').astype(np." + np + ")))";
  // Bytes for a float input are most often an image's pixels, which the
  // model's image processor scales and normalises before the model.
  if (samples.dtype == DType::U8 && isFloat(want))
    hint += std::string(", scaled as the model's preprocessing does ") +
            kPixelScaling + ", since training feeds the values as they are";
  return hint;
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

/// A row of labels (int64, or int32) that a cross-entropy ignores.
void fillIgnored(char *dst, DType dtype, size_t rowBytes) {
  const int64_t wide = kIgnoredLabel;
  const int32_t narrow = static_cast<int32_t>(kIgnoredLabel);
  const void *one = dtype == DType::I32 ? static_cast<const void *>(&narrow)
                                        : static_cast<const void *>(&wide);
  size_t esize = dtypeSize(dtype);
  for (size_t at = 0; at + esize <= rowBytes; at += esize)
    std::memcpy(dst + at, one, esize);
}

/// Shifts a sample's labels (int64, or int32) one place along their last
/// dim of `length`: position t gets t + 1's, the last the ignore index, as
/// a transformers causal LM shifts its labels.
void shiftLabels(char *row, DType dtype, size_t rowBytes, int64_t length) {
  size_t esize = dtypeSize(dtype);
  size_t runBytes = static_cast<size_t>(length) * esize;
  for (size_t at = 0; at + runBytes <= rowBytes; at += runBytes) {
    std::memmove(row + at, row + at + esize, runBytes - esize);
    fillIgnored(row + at + runBytes - esize, dtype, esize);
  }
}

/// Copies `sample` of `d` into `dst` (one row of its batch), converted to
/// the compiled input's dtype.
void copySample(const Dataset &d, int64_t sample, char *dst, size_t rowBytes) {
  if (d.samples.dtype == d.batch.dtype) {
    std::memcpy(dst, d.samples.data() + sample * rowBytes, rowBytes);
    return;
  }
  size_t esize = dtypeSize(d.batch.dtype);
  int64_t rowElems = static_cast<int64_t>(rowBytes / esize);
  if (roundsTo(d.samples.dtype, d.batch.dtype)) {
    convertFloats(d.samples.data() +
                      sample * rowElems * dtypeSize(d.samples.dtype),
                  d.samples.dtype, dst, d.batch.dtype, rowElems);
    return;
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

} // namespace

std::string diagnoseNonFinite(const std::vector<Dataset> &data,
                              const std::string &loss) {
  std::string labels = crossEntropyLabels(loss);
  for (const Dataset &d : data) {
    TensorRef batch = d.batchRef();
    int64_t n = batch.numel();
    for (int64_t k = 0; k < n; ++k)
      if (nonFinite(batch, k))
        return "input '" + d.name + "' holds NaN or Inf values in this " +
               "step's batch; clean the data";
    if (d.name == labels && d.batch.dtype == DType::I64 && n > 0) {
      const auto *v = static_cast<const int64_t *>(batch.data);
      if (std::all_of(v, v + n, [](int64_t x) { return x == kIgnoredLabel; }))
        return "every label of input '" + d.name +
               "' in this step's batch is the ignore index -100, so the "
               "mean loss is 0/0; give samples with labels to learn from";
    }
  }
  return "";
}

Status loadDatasets(const Executor &exec, const std::string &dir,
                    const char *purpose, const NoteFn &onNote,
                    std::vector<Dataset> &data, int64_t &samples,
                    int64_t &batch) {
  const Artifact &artifact = exec.artifact();
  samples = -1, batch = -1;
  bool anyDataInput = false;
  // The labels the artifact shifts as it feeds them (smpc --shift-labels).
  const auto &training = artifact.manifest.training();
  std::string shiftedLabels =
      training.shift_labels() ? crossEntropyLabels(training.loss()) : "";
  for (const auto &spec : artifact.manifest.inputs()) {
    if (!spec.name().empty() && spec.name()[0] == '@')
      continue; // fed by the trainer
    anyDataInput = true;
    if (!exec.hasInput(spec.name()))
      continue; // another pipeline stage reads it
    Dataset d;
    d.name = spec.name();
    std::string path = dir + "/" + fileNameFor(d.name) + ".npy";
    struct stat st;
    if (::stat(path.c_str(), &st) != 0)
      return Status::failure(path + ": missing; " + std::string(purpose) +
                             " needs input '" + d.name +
                             "' as a .npy file of samples");
    // Mapped: a corpus larger than memory trains; batches page it in.
    Status s = readNpy(path, d.samples, /*map=*/true);
    if (!s.ok())
      return s;
    d.batch.dtype = static_cast<DType>(spec.dtype());
    d.batch.shape.assign(spec.shape().begin(), spec.shape().end());
    if (d.batch.shape.empty())
      return Status::failure(path + ": input '" + d.name + "' is a scalar; " +
                             purpose + " data needs a leading sample dim");
    std::vector<int64_t> perSample(d.batch.shape.begin() + 1,
                                   d.batch.shape.end());
    bool converted =
        d.samples.dtype != d.batch.dtype && isInteger(d.samples.dtype) &&
        (d.batch.dtype == DType::I64 || d.batch.dtype == DType::I32);
    if (converted &&
        !(s = checkIntegerSamples(d.samples, d.batch.dtype, path, d.name)).ok())
      return s;
    if (roundsTo(d.samples.dtype, d.batch.dtype)) {
      converted = true;
      if (onNote)
        onNote(false,
               "note: " + roundingNote(path + " (input '" + d.name + "')",
                                       d.batch.dtype));
    }
    if ((d.samples.dtype != d.batch.dtype && !converted) ||
        d.samples.shape.empty() ||
        std::vector<int64_t>(d.samples.shape.begin() + 1,
                             d.samples.shape.end()) != perSample ||
        d.samples.shape[0] < 1)
      return Status::failure(
          path + ": input '" + d.name + "' is " + describe(d.samples.ref()) +
          "; " + purpose + " expects N samples of " +
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
    d.shift = d.name == shiftedLabels;
    if (d.shift && perSample.empty())
      return Status::failure(path + ": input '" + d.name +
                             "' holds one label a sample; the artifact "
                             "shifts each sample's labels along their "
                             "positions (smpc --shift-labels): compile "
                             "without it");
    data.push_back(std::move(d));
  }
  if (!anyDataInput)
    return Status::failure(artifact.dir + ": the model has no data inputs");
  if (samples >= 0)
    return Status::success();
  // A pipeline stage that reads none of them (a middle one) still counts
  // the other stages' samples and batch, so that it runs as many steps and
  // evaluation batches as they do.
  for (const auto &spec : artifact.manifest.inputs()) {
    if ((!spec.name().empty() && spec.name()[0] == '@') || spec.shape().empty())
      continue;
    std::string path = dir + "/" + fileNameFor(spec.name()) + ".npy";
    NpyArray others;
    if (Status s = readNpy(path, others, /*map=*/true); !s.ok())
      return Status::failure(path + ": " + std::string(purpose) +
                             " needs input '" + spec.name() +
                             "' (another pipeline stage reads it): " + s.error);
    if (others.shape.empty() || others.shape[0] < 1)
      return Status::failure(path + ": input '" + spec.name() +
                             "' has no samples");
    samples = others.shape[0];
    batch = spec.shape(0);
    return Status::success();
  }
  return Status::success();
}

int64_t streamSample(int64_t k, int64_t j, int64_t samples,
                     int64_t globalBatch) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(k % samples) *
                                   static_cast<uint64_t>(globalBatch) +
                               static_cast<uint64_t>(j)) %
                              static_cast<uint64_t>(samples));
}

Status feedBatch(Executor &exec, std::vector<Dataset> &data, int64_t k,
                 int64_t samples, int64_t batch, int64_t globalBatch,
                 int64_t rank, const std::string &dataDir,
                 const BatchSlice *slice) {
  for (Dataset &d : data) {
    size_t rowBytes = d.batch.bytes() / batch;
    bool padded = slice && d.name == slice->padLabels;
    for (int64_t i = 0; i < batch; ++i) {
      // Data parallel: rank r takes its share of the global batch.
      int64_t at = rank * batch + i;
      int64_t sample = slice ? (slice->first + at) % samples
                             : streamSample(k, at, samples, globalBatch);
      char *dst = d.batchBytes.data() + i * rowBytes;
      if (padded && at >= slice->real) {
        fillIgnored(dst, d.batch.dtype, rowBytes);
        continue;
      }
      copySample(d, sample, dst, rowBytes);
      if (d.shift)
        shiftLabels(dst, d.batch.dtype, rowBytes, d.batch.shape.back());
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

} // namespace smprt
