//===- DeepSpeedConfig.h - smpc --deepspeed FILE: a DeepSpeed config -*- C++
//-*-===//
//
// Reads the ds_config.json a DeepSpeed (or Hugging Face Trainer --deepspeed)
// user already has: its batch sizes, optimizer, scheduler, precision,
// gradient clipping and ZeRO settings become smpc flags (ConfigFile.h's
// items, so they must agree with the command line and --config). A key
// that would train other numbers than DeepSpeed does, and that smp cannot
// honour, is refused with what to change; keys that only tune how DeepSpeed
// runs (bucket sizes, overlap, logging) are listed in one warning.
// docs/python.md has the table.
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_DEEPSPEEDCONFIG_H
#define SMPC_DEEPSPEEDCONFIG_H

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

/// The flag tokens of a DeepSpeed config's text (`origin` names it in
/// errors), checked against `commandLine` (the other arguments, --config's
/// flags included); `warnings` gets what smpc should print.
llvm::Expected<std::vector<std::string>>
deepSpeedFlags(llvm::StringRef text, llvm::StringRef origin,
               const std::vector<std::string> &commandLine,
               std::vector<std::string> &warnings,
               llvm::StringRef where = "on the command line (or in --config)");

/// Finds `--deepspeed FILE` in `args`, removes it and puts the flags the
/// file stands for in front of the rest (`where` says where the other flags
/// come from, in a refusal).
llvm::Error expandDeepSpeedConfig(
    std::vector<std::string> &args, std::vector<std::string> &warnings,
    llvm::StringRef where = "on the command line (or in --config)");

#endif // SMPC_DEEPSPEEDCONFIG_H
