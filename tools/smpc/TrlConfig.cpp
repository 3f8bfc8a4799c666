//===- TrlConfig.cpp - smpc --training-args: TRL's SFTConfig keys ---------===//
//
// TRL's SFTConfig (trl 1.x) is a TrainingArguments with keys of its own.
// Most say how TRL turns a dataset into tokens and labels (the text field,
// max_length, truncation, completion-only or assistant-only labels, special
// tokens); smprun trains the --data it is given, so those are named in one
// warning. Packing (several sequences in one row, attended apart through
// their position ids) and another loss type train other numbers than the
// exported model computes: refused. The model's loading keys do not apply
// to an exported file.
//
//===----------------------------------------------------------------------===//

#include "TrainingArgs.h"

#include "ConfigFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace {

/// SFTConfig's keys that shape the tokens and labels TRL makes.
const char *kDataKeys[] = {
    "dataset_text_field",  "dataset_kwargs",  "dataset_num_proc",
    "eos_token",           "pad_token",       "chat_template_path",
    "max_length",          "truncation_mode", "shuffle_dataset",
    "pad_to_multiple_of",  "eval_packing",    "completion_only_loss",
    "assistant_only_loss", "packing_strategy"};

/// SFTConfig's keys that load the model or tune the run.
const char *kOtherKeys[] = {"model_init_kwargs", "trust_remote_code",
                            "activation_offloading"};

const char *kTrainingKeys[] = {"packing", "padding_free", "loss_type",
                               "router_aux_loss_coef"};

} // namespace

bool smpc::isSftConfigKey(llvm::StringRef key) {
  return llvm::is_contained(kDataKeys, key) ||
         llvm::is_contained(kOtherKeys, key) ||
         llvm::is_contained(kTrainingKeys, key);
}

llvm::Error smpc::readSftConfigKeys(const llvm::json::Object &root,
                                    llvm::StringRef origin,
                                    std::vector<std::string> &notes) {
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   origin + ": " + msg);
  };
  auto isTrue = [&](const char *key) {
    const llvm::json::Value *v = root.get(key);
    return v && v->getAsBoolean() == std::optional<bool>(true);
  };
  for (const char *key : {"packing", "padding_free"})
    if (isTrue(key))
      return fail(std::string("\"") + key +
                  "\": true puts several sequences in one row, attended "
                  "apart through their position ids, which the exported "
                  "model does not do: set it false (and give smprun one "
                  "sequence per row)");
  if (const llvm::json::Value *v = root.get("loss_type"))
    if (v->getAsString() && *v->getAsString() != "nll")
      return fail("\"loss_type\": " + shownValue(*v) +
                  " is not the cross-entropy smp trains: set it to \"nll\"");
  if (const llvm::json::Value *v = root.get("router_aux_loss_coef"))
    if (v->kind() != llvm::json::Value::Null &&
        v->getAsNumber() != std::optional<double>(0.0))
      return fail("\"router_aux_loss_coef\": " + shownValue(*v) +
                  " adds a mixture-of-experts router loss, which smp does "
                  "not have: set it to null");
  std::vector<std::string> data;
  for (const char *key : kDataKeys)
    if (const llvm::json::Value *v = root.get(key))
      data.push_back(std::string(key) + " " + shownValue(*v));
  if (!data.empty())
    notes.push_back("TRL's SFTConfig: " + llvm::join(data, ", ") +
                    ": they say how TRL makes tokens and labels from a "
                    "dataset; smprun trains --data as it is given (make it "
                    "as TRL would, labels -100 where no loss is wanted)");
  return llvm::Error::success();
}
