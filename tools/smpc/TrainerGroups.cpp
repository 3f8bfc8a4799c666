//===- TrainerGroups.cpp - smpc --hf-no-decay: the Trainer's groups -------===//
//
// The Hugging Face Trainer gives weight decay to every parameter but those
// Trainer.get_decay_parameter_names leaves out (transformers 5): the
// parameters of nn.LayerNorm modules, and those whose lower-cased name
// matches "bias", "layernorm", "rmsnorm", "(^|\.)norm($|\.)" or
// "_norm($|\.)". The file has no module types, so nn.LayerNorm's
// parameters are those a LayerNormalization reads as its scale or bias
// (what every export of nn.LayerNorm writes). The result is a --no-decay
// regex naming them exactly.
//
//===----------------------------------------------------------------------===//

#include "TrainerGroups.h"

#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/IR/TrainedParams.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <set>

using namespace mlir;

std::vector<std::string> smpc::trainerNoDecayNames(ModuleOp module,
                                                   llvm::StringRef freeze) {
  static const llvm::Regex byName(
      "bias|layernorm|rmsnorm|(^|\\.)norm($|\\.)|_norm($|\\.)");
  llvm::Regex frozen(freeze);
  std::set<std::string> names; // sorted, and one name read by two functions
  for (auto func : module.getOps<func::FuncOp>()) {
    // The arguments a layer norm reads as its scale or bias.
    llvm::DenseSet<unsigned> normed;
    func.walk([&](smp::LayerNormOp op) {
      for (Value v : {op.getScale(), op.getBias()})
        if (auto arg = dyn_cast_or_null<BlockArgument>(v);
            arg && arg.getOwner()->getParentOp() == func)
          normed.insert(arg.getArgNumber());
    });
    // Buffers (frozen), running statistics and parameters --freeze leaves
    // untrained are in no group.
    llvm::DenseSet<Value> running = smp::runningStatArgs(func);
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      if (!smp::isTrainedParam(func, i, freeze.empty() ? nullptr : &frozen,
                               running))
        continue;
      auto name =
          func.getArgAttrOfType<StringAttr>(i, smp::SmpDialect::kParamAttr);
      if (normed.contains(i) || byName.match(name.getValue().lower()))
        names.insert(name.str());
    }
  }
  return {names.begin(), names.end()};
}

std::string smpc::exactNamesRegex(const std::vector<std::string> &names) {
  if (names.empty())
    return "";
  std::vector<std::string> escaped;
  for (const std::string &n : names)
    escaped.push_back(llvm::Regex::escape(n));
  return "^(" + llvm::join(escaped, "|") + ")$";
}
