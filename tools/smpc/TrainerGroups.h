//===- TrainerGroups.h - smpc --hf-no-decay: the Trainer's groups -*- C++ -*-//
//
// The parameters the Hugging Face Trainer trains without weight decay, found
// in an imported model (TrainerGroups.cpp says how).
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_TRAINERGROUPS_H
#define SMPC_TRAINERGROUPS_H

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace smpc {

/// The names of the trained parameters of `module` (not buffers, none that
/// the --freeze regex `freeze` matches) that the Trainer leaves out of
/// weight decay, sorted.
std::vector<std::string> trainerNoDecayNames(mlir::ModuleOp module,
                                             llvm::StringRef freeze);

/// A regex matching exactly `names` ("" for none).
std::string exactNamesRegex(const std::vector<std::string> &names);

} // namespace smpc

#endif // SMPC_TRAINERGROUPS_H
