//===- DataChecks.h - Data that would train another model -------*- C++ -*-===//
//
// Checks of a --data (or --eval-data) directory against the model it feeds,
// for mistakes the shapes cannot show: Hugging Face's unshifted causal-LM
// labels under smpc's cross-entropy, and a mask or token types in the
// directory that the model does not read. Each reads the files themselves,
// not only this rank's inputs, so that every rank of a plan decides alike.
//
//===----------------------------------------------------------------------===//

#ifndef SMPRT_TRAIN_DATACHECKS_H
#define SMPRT_TRAIN_DATACHECKS_H

#include "smprt/Base.h"
#include "smprt/exec/Artifact.h"

#include <string>

namespace smprt {

/// How the model's preprocessing scales 8-bit samples for a float input (an
/// image's pixels), said where training and forward runs refuse them.
constexpr const char *kPixelScaling =
    "(8-bit pixels: a Hugging Face image processor gives (x / 255 - mean) / "
    "std)";

/// How many of the first samples of a file the checks read: the mistakes
/// they look for show in every sample.
constexpr int64_t kCheckedSamples = 1024;

/// Refuses `dir`'s labels of a `cross_entropy:` loss (smpc --loss) that
/// equal a data input of the same shape at every labelled position (not
/// -100) of the first samples: a causal LM's unshifted labels (Hugging
/// Face's collator sets labels = input_ids; the model shifts them, smpc's
/// loss does not), which would train the model to repeat its input.
/// `flag`: the option that accepts them, named in the error.
Status checkLabelsNotCopied(const Artifact &artifact, const std::string &dir,
                            const char *flag);

/// Refuses a file of `dir` that the model does not read but PyTorch's model
/// would have: `*mask.npy` whose values are not all equal (an attention or
/// padding mask that masks something), `*token_type_ids.npy` not all zero
/// (a Hugging Face model without them takes zeros). The model would run as
/// if the data had no such file. `flag`: the option that accepts it.
Status checkUnreadInputs(const Artifact &artifact, const std::string &dir,
                         const char *flag);

} // namespace smprt

#endif // SMPRT_TRAIN_DATACHECKS_H
