//===- Help.h - smpc's help: the usage and each command's -------*- C++ -*-===//

#ifndef SMPC_HELP_H
#define SMPC_HELP_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

/// smpc --help.
const char *smpcUsage();

/// smpc COMMAND --help: the command's synopsis and the sections of the usage
/// that apply to it; nullopt for an unknown command.
std::optional<std::string> commandHelp(llvm::StringRef command);

/// The commands (compile, plan, import, summary, ops).
std::vector<std::string> smpcCommands();

/// Every flag the usage explains ("--batch-size", "-o", ...): an unknown
/// flag is compared with them.
std::vector<std::string> smpcFlags();

#endif // SMPC_HELP_H
