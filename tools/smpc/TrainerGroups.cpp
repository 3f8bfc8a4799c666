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

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Regex.h"

#include <set>

using namespace mlir;

namespace {

/// The parameter name of `v` when it is an argument of `func` that names
/// one.
std::optional<std::string> paramName(func::FuncOp func, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner()->getParentOp() != func)
    return std::nullopt;
  auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                smp::SmpDialect::kParamAttr);
  if (!name)
    return std::nullopt;
  return name.str();
}

} // namespace

std::vector<std::string> smpc::trainerNoDecayNames(ModuleOp module,
                                                   llvm::StringRef freeze) {
  static const llvm::Regex byName(
      "bias|layernorm|rmsnorm|(^|\\.)norm($|\\.)|_norm($|\\.)");
  std::set<std::string> names;
  for (auto func : module.getOps<func::FuncOp>()) {
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto name =
              func.getArgAttrOfType<StringAttr>(i, smp::SmpDialect::kParamAttr))
        if (byName.match(name.getValue().lower()))
          names.insert(name.str());
    func.walk([&](smp::LayerNormOp op) {
      for (Value v : {op.getScale(), op.getBias()})
        if (v)
          if (auto name = paramName(func, v))
            names.insert(*name);
    });
  }
  // Buffers (frozen) and parameters --freeze leaves untrained are in no
  // group.
  llvm::Regex frozen(freeze);
  std::vector<std::string> out;
  for (auto func : module.getOps<func::FuncOp>())
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      auto name =
          func.getArgAttrOfType<StringAttr>(i, smp::SmpDialect::kParamAttr);
      if (!name || !names.count(name.str()) ||
          func.getArgAttr(i, smp::SmpDialect::kFrozenAttr) ||
          (!freeze.empty() && frozen.match(name.getValue())))
        continue;
      names.erase(name.str());
      out.push_back(name.str());
    }
  llvm::sort(out);
  return out;
}

std::string smpc::exactNamesRegex(const std::vector<std::string> &names) {
  if (names.empty())
    return "";
  std::vector<std::string> escaped;
  for (const std::string &n : names)
    escaped.push_back(llvm::Regex::escape(n));
  return "^(" + llvm::join(escaped, "|") + ")$";
}
