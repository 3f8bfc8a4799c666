//===- DataChecks.cpp - Data that would train another model ---------------===//

#include "smprt/train/DataChecks.h"

#include "TrainData.h"

#include "smp/kernels/common/Elements.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <set>

namespace smprt {
namespace {

std::vector<int64_t> perSampleOf(const std::vector<int64_t> &shape) {
  return shape.empty() ? shape
                       : std::vector<int64_t>(shape.begin() + 1, shape.end());
}

int64_t product(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// The first samples of `a` (at most kCheckedSamples) and their elements.
int64_t checkedSamples(const NpyArray &a) {
  return a.shape.empty() ? 0 : std::min<int64_t>(a.shape[0], kCheckedSamples);
}

/// Whether the first `samples` of `labels` equal those of `input` `lag`
/// positions earlier in each sample of `length` positions (0: the same
/// position; -1: the next) at every position the loss counts (not -100)
/// that has one, with at least one such position; `counted` gets how many
/// were compared.
bool copiesInput(const NpyArray &labels, const NpyArray &input, int64_t samples,
                 int64_t length, int64_t lag, int64_t &counted) {
  counted = 0;
  for (int64_t i = 0; i < samples * length; ++i) {
    int64_t at = i % length - lag; // the input's position
    if (at < 0 || at >= length)
      continue;
    int64_t want =
        smp::kernels::common::loadIndex(labels.data(), labels.dtype, i);
    if (want == kIgnoredLabel)
      continue;
    if (smp::kernels::common::loadIndex(input.data(), input.dtype, i - lag) !=
        want)
      return false;
    ++counted;
  }
  return counted > 0;
}

bool endsWith(const std::string &s, const std::string &tail) {
  return s.size() >= tail.size() &&
         s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// The .npy files of `dir` by stem, sorted.
std::set<std::string> npyStems(const std::string &dir) {
  std::set<std::string> stems;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && endsWith(name, ".npy"))
        stems.insert(name.substr(0, name.size() - 4));
    }
    ::closedir(d);
  }
  return stems;
}

/// Why labels that copy `input` `lag` positions earlier (where: the
/// counts) are refused, and what to pass instead.
std::string copiedLabels(const std::string &labelsPath, const std::string &loss,
                         const std::string &input, const std::string &where,
                         int64_t lag, const char *flag) {
  std::string head = labelsPath + ": the labels of loss '" + loss +
                     "' are input '" + input + "' ";
  if (lag < 0) // the artifact shifts them (smpc --shift-labels)
    return head + "shifted already, each the token after its position" + where +
           ", but the artifact shifts them again as it feeds them (smpc "
           "--shift-labels), so the model would learn to predict two tokens "
           "ahead: give labels = " +
           input +
           " (-100 where padded) or compile without --shift-labels; if that "
           "is meant, pass " +
           flag;
  return head +
         (lag ? "shifted the wrong way, each the token before its position"
              : "itself") +
         where +
         ", so the model would learn to repeat a token it reads. A causal "
         "language model's labels are shifted inside the transformers model, "
         "not by smpc's cross_entropy loss: give labels[:, t] = " +
         input +
         "[:, t + 1] and -100 at the last position (numpy: "
         "np.concatenate([ids[:, 1:], np.full((len(ids), 1), -100)], "
         "axis=1)), or labels = " +
         input +
         " with smpc --shift-labels, which shifts them as the transformers "
         "model does; if the model is meant to " +
         (lag ? "predict the token before" : "reproduce its input") +
         ", pass " + flag;
}

} // namespace

Status checkLabelsNotCopied(const Artifact &artifact, const std::string &dir,
                            const char *flag) {
  const std::string &loss = artifact.manifest.training().loss();
  std::string labelsName = crossEntropyLabels(loss);
  if (labelsName.empty())
    return Status::success(); // a model's own loss may shift its labels
  const auto &inputs = artifact.manifest.inputs();
  auto labelsSpec =
      std::find_if(inputs.begin(), inputs.end(),
                   [&](const auto &spec) { return spec.name() == labelsName; });
  if (labelsSpec == inputs.end() || labelsSpec->shape().empty())
    return Status::success();
  std::vector<int64_t> perSample =
      perSampleOf({labelsSpec->shape().begin(), labelsSpec->shape().end()});
  NpyArray labels;
  std::string labelsPath = dir + "/" + fileNameFor(labelsName) + ".npy";
  if (!readNpy(labelsPath, labels, /*map=*/true).ok() ||
      !isInteger(labels.dtype) || perSampleOf(labels.shape) != perSample)
    return Status::success(); // loading the data says what is wrong
  for (const auto &spec : inputs) {
    DType dtype = static_cast<DType>(spec.dtype());
    if (spec.name() == labelsName || spec.name().empty() ||
        spec.name()[0] == '@' || spec.shape().empty() ||
        perSampleOf({spec.shape().begin(), spec.shape().end()}) != perSample ||
        !(dtype == DType::I64 || dtype == DType::I32))
      continue;
    NpyArray input;
    std::string path = dir + "/" + fileNameFor(spec.name()) + ".npy";
    if (!readNpy(path, input, /*map=*/true).ok() || !isInteger(input.dtype) ||
        perSampleOf(input.shape) != perSample)
      continue;
    // A copy is the same in every sample: the first ones tell. A sequence
    // shifted the wrong way (np.roll(ids, 1, axis=1)) asks for the token
    // before, which a causal model reads too. Labels the artifact shifts
    // must not be shifted already.
    int64_t samples = std::min(checkedSamples(labels), checkedSamples(input));
    int64_t counted = 0, length = product(perSample);
    bool shifts = artifact.manifest.training().shift_labels();
    std::vector<int64_t> lags;
    if (!shifts)
      lags.push_back(0);
    if (perSample.size() == 1) // a sequence a sample
      lags.push_back(shifts ? -1 : 1);
    for (int64_t lag : lags)
      if (copiesInput(labels, input, samples, length, lag, counted))
        return Status::failure(copiedLabels(
            labelsPath, loss, spec.name(),
            " (" + path + ": equal at all " + std::to_string(counted) +
                " labelled positions of the first " + std::to_string(samples) +
                " samples)",
            lag, flag));
  }
  return Status::success();
}

namespace {

/// A data input the model reads, as the unread file's check needs it.
struct ReadInput {
  std::string name, path;
  NpyArray samples;
};

/// For an unread mask: the read input whose values at every masked position
/// of the first samples are one and the same (the pad token) over at least
/// two positions: the mask marks padding of that input. `pad` and
/// `masked` get the value and the count. Null when none does.
const ReadInput *paddedInput(const std::vector<ReadInput> &inputs,
                             const NpyArray &mask, bool zerosMask, int64_t &pad,
                             int64_t &masked) {
  for (const ReadInput &in : inputs) {
    if (perSampleOf(in.samples.shape) != perSampleOf(mask.shape))
      continue;
    int64_t n = std::min(checkedSamples(in.samples), checkedSamples(mask)) *
                product(perSampleOf(mask.shape));
    masked = 0;
    bool one = true;
    for (int64_t i = 0; i < n && one; ++i) {
      bool zero =
          smp::kernels::common::loadIndex(mask.data(), mask.dtype, i) == 0;
      if (zero != zerosMask)
        continue;
      int64_t v = smp::kernels::common::loadIndex(in.samples.data(),
                                                  in.samples.dtype, i);
      one = masked == 0 || v == pad;
      pad = v;
      ++masked;
    }
    if (one && masked >= 2)
      return &in;
  }
  return nullptr;
}

/// Whether some read input of `types`'s shape is given with token types that
/// are not all 0 in the first samples.
const ReadInput *typedInput(const std::vector<ReadInput> &inputs,
                            const NpyArray &types, int64_t &nonzero) {
  int64_t n = checkedSamples(types) * product(perSampleOf(types.shape));
  nonzero = 0;
  for (int64_t i = 0; i < n; ++i)
    nonzero +=
        smp::kernels::common::loadIndex(types.data(), types.dtype, i) != 0;
  if (nonzero == 0)
    return nullptr;
  for (const ReadInput &in : inputs)
    if (perSampleOf(in.samples.shape) == perSampleOf(types.shape))
      return &in;
  return nullptr;
}

} // namespace

Status checkUnreadInputs(const Artifact &artifact, const std::string &dir,
                         const char *flag) {
  std::set<std::string> read;
  std::vector<ReadInput> inputs;
  std::string names;
  for (const auto &spec : artifact.manifest.inputs()) {
    if (spec.name().empty() || spec.name()[0] == '@')
      continue;
    read.insert(fileNameFor(spec.name()));
    names += (names.empty() ? "" : ", ") + spec.name();
    ReadInput in{
        spec.name(), dir + "/" + fileNameFor(spec.name()) + ".npy", {}};
    if (readNpy(in.path, in.samples, /*map=*/true).ok() &&
        isInteger(in.samples.dtype) && !in.samples.shape.empty())
      inputs.push_back(std::move(in));
  }
  for (const std::string &stem : npyStems(dir)) {
    bool mask = endsWith(stem, "mask");
    if (read.count(stem) || !(mask || endsWith(stem, "token_type_ids")))
      continue;
    std::string path = dir + "/" + stem + ".npy";
    NpyArray a;
    if (!readNpy(path, a, /*map=*/true).ok() || a.shape.empty() ||
        !(isInteger(a.dtype) || a.dtype == DType::Bool))
      continue;
    std::string said;
    if (mask) {
      // An attention mask's 0s are the padding; a padding mask's 1s (True).
      bool zerosMask = stem.find("padding_mask") == std::string::npos;
      int64_t pad = 0, masked = 0;
      const ReadInput *in = paddedInput(inputs, a, zerosMask, pad, masked);
      if (!in)
        continue;
      said = "marks " + std::to_string(masked) + " positions of the first " +
             std::to_string(checkedSamples(a)) + " samples as padding (" +
             in->path + " holds " + std::to_string(pad) +
             " at each), but the model reads no input '" + stem +
             "' (its inputs: " + names +
             "), so it would attend to them as to any other token. Export "
             "the model with the mask as an input (torch.onnx.export(model, "
             "(" +
             in->name + ", " + stem + "), ..., input_names=['" + in->name +
             "', '" + stem +
             "']); smp.export takes the same), or, if that is meant (a causal "
             "LM padded at the end of each sample with labels -100 there: "
             "the mask changes no loss), pass ";
    } else {
      int64_t nonzero = 0;
      const ReadInput *in = typedInput(inputs, a, nonzero);
      if (!in)
        continue;
      said = "gives " + std::to_string(nonzero) + " positions of the first " +
             std::to_string(checkedSamples(a)) +
             " samples another token type than 0, but the model reads no "
             "input '" +
             stem + "' (its inputs: " + names +
             "), so it would take every token of " + in->name +
             " as of type 0. Export the model with them as an input "
             "(input_names=['" +
             in->name + "', ..., '" + stem + "']), or, if that is meant, pass ";
    }
    return Status::failure(path + ": " + said + flag);
  }
  return Status::success();
}

} // namespace smprt
