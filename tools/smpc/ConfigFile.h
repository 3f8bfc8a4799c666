//===- ConfigFile.h - smpc --config FILE: SageMaker-style keys -*- C++ -*-===//
//
// A JSON object whose keys are SageMaker model-parallel v1 parameters
// (pipeline_parallel_degree, microbatches, ddp, ...) or smpc's own flags by
// their names ("batch-size" or "batch_size", "lr", "dim": {"seq": 16}).
// Each key becomes the flag tokens it stands for; the command line's own
// flags must agree with them. The Python package's `config=` goes through
// this code too (it writes the dict to a file and passes --config).
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_CONFIGFILE_H
#define SMPC_CONFIGFILE_H

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

/// Finds `--config FILE` (or `--config=FILE`) in `args`, removes it and puts
/// the flags the file stands for in front of the rest. Errors (an unreadable
/// file, an unknown key with a did-you-mean, a bad value, two keys or a key
/// and a command-line flag that disagree) come back as one message.
llvm::Error expandConfigFile(std::vector<std::string> &args);

/// The flag tokens of a config file's text (`origin` names it in errors),
/// checked against the flags of `commandLine` (the arguments without
/// --config); flags given there with the same value are left out.
llvm::Expected<std::vector<std::string>>
configFileFlags(llvm::StringRef text, llvm::StringRef origin,
                const std::vector<std::string> &commandLine = {});

#endif // SMPC_CONFIGFILE_H
