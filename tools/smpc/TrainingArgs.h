//===- TrainingArgs.h - smpc --training-args FILE: the HF Trainer's -*- C++
//-*-//
//
// Reads the Hugging Face Trainer's TrainingArguments as JSON (what
// `training_args.to_json_string()` writes, transformers 4 or 5; a hand-made
// subset too): the batch, optimizer, weight-decay groups, clipping,
// learning-rate schedule and precision the Trainer would train with become
// smpc flags (ConfigFile.h's items, so they must agree with the command line
// and --config). A key that would make the Trainer train other numbers and
// that smp cannot follow is refused with what to change; keys that only
// say how the Trainer logs, evaluates, saves or runs are ignored (the
// notable ones listed in a warning); unknown keys are refused. With a
// DeepSpeed config (the file's "deepspeed", or --deepspeed), the arguments
// give only what the Trainer fills or checks in it (HfTrainerDeepSpeedConfig)
// and the config's own reader (DeepSpeedConfig.h) does the rest.
// docs/python.md has the table.
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_TRAININGARGS_H
#define SMPC_TRAININGARGS_H

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

/// The flag tokens of a TrainingArguments JSON text (`origin` names it in
/// errors), checked against `commandLine` (the other arguments, --config's
/// flags included); `warnings` gets what smpc should print.
llvm::Expected<std::vector<std::string>>
trainingArgsFlags(llvm::StringRef text, llvm::StringRef origin,
                  const std::vector<std::string> &commandLine,
                  std::vector<std::string> &warnings);

namespace smpc {
/// Whether `key` is one of TRL's SFTConfig keys (TrlConfig.cpp).
bool isSftConfigKey(llvm::StringRef key);
/// Refuses SFTConfig keys that train other numbers; names those that shape
/// the data in `notes`.
llvm::Error readSftConfigKeys(const llvm::json::Object &root,
                              llvm::StringRef origin,
                              std::vector<std::string> &notes);
} // namespace smpc

/// Finds `--training-args FILE` in `args`, removes it and puts the flags the
/// file stands for in front of the rest.
llvm::Error expandTrainingArgs(std::vector<std::string> &args,
                               std::vector<std::string> &warnings);

#endif // SMPC_TRAININGARGS_H
