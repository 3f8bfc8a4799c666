//===- FxGraph.cpp - What the dynamo export's metadata says ---------------===//
//
// Helpers for FxGraph.h: reading fx_node texts and parameter names.
//
//===----------------------------------------------------------------------===//

#include "FxGraph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace smp::onnx_frontend {

/// The `%name` tokens of an fx_node text after "args = (" (the arguments).
std::vector<std::string> fxArgs(llvm::StringRef fx) {
  return fxArgs(fx, "%", ",) ]}");
}

/// The FX value an fx_node text defines (`%add_1 : ...` -> "add_1").
std::string fxDefined(llvm::StringRef fx) {
  if (!fx.consume_front("%"))
    return "";
  return fx.split(' ').first.str();
}

/// The aten op an FX name was made from: "layer_norm_1" -> "layer_norm".
llvm::StringRef fxOp(llvm::StringRef name) {
  auto [head, tail] = name.rsplit('_');
  if (!tail.empty() && llvm::all_of(tail, llvm::isDigit))
    return head;
  return name;
}

bool isParamArg(llvm::StringRef a) { return a.starts_with("p_"); }
bool isLiftedArg(llvm::StringRef a) {
  return a.starts_with("p_") || a.starts_with("b_") || a.starts_with("c_");
}

std::string joinNames(const std::vector<std::string> &names) {
  std::string list;
  for (size_t k = 0; k < names.size() && k < 6; ++k)
    list += (k ? ", " : "") + names[k];
  if (names.size() > 6)
    list += ", ... (" + std::to_string(names.size()) + " in all)";
  return list;
}

llvm::Error refuse(llvm::StringRef path, const std::string &what) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      path + ": " + what +
          "; smp would train another model: re-export with "
          "torch.onnx.export(..., optimize=False)");
}

/// The module a parameter is an attribute of ("a.b" of "a.b.weight"; ""
/// for a top-level one).
llvm::StringRef ownerModule(llvm::StringRef param) {
  auto [module, leaf] = param.rsplit('.');
  return leaf.empty() ? llvm::StringRef() : module;
}

/// Whether the parameter `alias` (gone from the file) may be tied to the
/// parameter `read`: a node running in `alias`'s own module reads `read`,
/// which has the same leaf name (HF's tied input embedding: the embedding
/// module's gather reads `lm_head.weight`, torch.export having kept one
/// name for the shared tensor; a BERT-style head's `decoder.bias`, which is
/// the head's `bias`). FxGraph::tiedAliasRead checks a read inside the
/// alias's own module further.
bool tiedAlias(llvm::StringRef alias, llvm::StringRef read,
               const std::vector<std::string> &scopes) {
  auto [module, leaf] = alias.rsplit('.');
  if (leaf.empty() || read.rsplit('.').second != leaf)
    return false;
  return llvm::is_contained(scopes, module);
}

/// Ops that only move elements, each element once (a fold of one is its
/// input's elements, rearranged).
const llvm::StringSet<> kBijections = {
    "t",         "transpose", "permute", "view",      "reshape", "_unsafe_view",
    "unsqueeze", "squeeze",   "clone",   "contiguous"};
/// Ops that only move or copy elements: kBijections, copies and subsets.
bool onlyMoves(llvm::StringRef op) {
  static const llvm::StringSet<> kCopiesAndSubsets = {
      "expand", "repeat", "embedding", "select", "slice"};
  return kBijections.contains(op) || kCopiesAndSubsets.contains(op);
}

std::vector<std::string> fxArgs(llvm::StringRef fx, llvm::StringRef prefix,
                                llvm::StringRef ends) {
  std::vector<std::string> out;
  llvm::StringRef args = fx.split("args = (").second;
  while (!args.empty()) {
    size_t at = args.find(prefix);
    if (at == llvm::StringRef::npos)
      break;
    args = args.drop_front(at + 1);
    size_t end = args.find_first_of(ends);
    out.push_back(args.take_front(end).str());
    args = args.drop_front(std::min(end, args.size()));
  }
  return out;
}

} // namespace smp::onnx_frontend
