//===- UnsignedFiles.cpp - What a TorchScript file cannot say -------------===//
//
// A file without the dynamo exporter's graph signature or an smp.export
// sidecar (a TorchScript export) does not say which initializers are
// PyTorch parameters and which buffers, nor, for one read by several nodes,
// whether it is one tensor. What its node names do say (TorchScript scopes
// them by module: `/encoder/layer_1/ffn/Add`) is read here; where nothing
// says, smp trains a parameter and warns, naming the flag that says
// otherwise (docs/bring-your-own-model.md). SharedInitializers.cpp applies
// these rules.
//
//===----------------------------------------------------------------------===//

#include "FxGraph.h"
#include "SharedInitializers.h"

#include "llvm/Support/Regex.h"

#include <cstring>

namespace smp::onnx_frontend {
namespace {

/// The module path of a TorchScript-scoped node name, each scope a
/// component ("/m/enc/layer.0/ffn_1/Add" -> "m", "enc", "layer.0",
/// "ffn_1"), or none for another name.
llvm::SmallVector<llvm::StringRef> torchScriptScopes(llvm::StringRef name) {
  llvm::SmallVector<llvm::StringRef> parts;
  if (!name.consume_front("/"))
    return parts;
  name.split(parts, '/');
  if (!parts.empty())
    parts.pop_back(); // the op
  return parts;
}

/// The leaf of a parameter name ("a.b.bias" -> "bias").
llvm::StringRef leafName(llvm::StringRef name) {
  auto [module, leaf] = name.rsplit('.');
  return leaf.empty() ? name : leaf;
}

} // namespace

bool readByItsModule(const onnx::NodeProto &n, llvm::StringRef param) {
  auto [module, leaf] = param.rsplit('.');
  llvm::SmallVector<llvm::StringRef> scopes = torchScriptScopes(n.name());
  if (leaf.empty() || scopes.empty())
    return false;
  // Each scope is the module path's next component, or that component
  // with a repeated call's suffix (fxOp strips it: "ffn_2" -> "ffn").
  llvm::StringRef rest = module;
  for (llvm::StringRef s : scopes) {
    auto consume = [&](llvm::StringRef c) {
      if (c.empty() || !rest.starts_with(c) ||
          (rest.size() > c.size() && rest[c.size()] != '.'))
        return false;
      rest = rest.drop_front(std::min(rest.size(), c.size() + 1));
      return true;
    };
    if (!consume(s) && !consume(fxOp(s)))
      return false;
  }
  return rest.empty();
}

bool repeatedCallCopy(const onnx::GraphProto &g,
                      const onnx::NodeProto &identity) {
  const std::string &copy = identity.output(0), &source = identity.input(0);
  // A merged parameter's marker carries its state_dict name (`fc_1.weight`
  // beside `fc.weight`: another module, whatever its scope looks like); a
  // call's fold, a name the exporter made up (`onnx::MatMul_55`).
  if (!generatedName(copy))
    return false;
  std::vector<llvm::SmallVector<llvm::StringRef>> sourceScopes;
  std::vector<const onnx::NodeProto *> copyReaders;
  for (const onnx::NodeProto &n : g.node())
    for (const std::string &in : n.input()) {
      if (in == source)
        sourceScopes.push_back(torchScriptScopes(n.name()));
      else if (in == copy)
        copyReaders.push_back(&n);
    }
  // Each component the source's reader's, or that with a call's suffix.
  auto callOf = [](llvm::ArrayRef<llvm::StringRef> c,
                   llvm::ArrayRef<llvm::StringRef> s) {
    if (c.empty() || c.size() != s.size())
      return false;
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i] != s[i] && fxOp(c[i]) != s[i])
        return false;
    return true;
  };
  return !copyReaders.empty() &&
         llvm::all_of(copyReaders, [&](const onnx::NodeProto *n) {
           llvm::SmallVector<llvm::StringRef> c = torchScriptScopes(n->name());
           return llvm::any_of(sourceScopes,
                               [&](const auto &s) { return callOf(c, s); });
         });
}

std::vector<std::string>
unsignedFileWarnings(const onnx::GraphProto &g,
                     llvm::ArrayRef<FoldCandidate> trained) {
  std::vector<std::string> out;
  std::vector<FoldCandidate> folds;
  std::vector<std::string> constants;
  for (const FoldCandidate &c : trained) {
    llvm::StringRef leaf = leafName(c.name);
    // torch.nn.MultiheadAttention's in_proj_bias starts at zeros too.
    bool named = leaf != "weight" && leaf != "bias" && leaf != "in_proj_bias" &&
                 !c.slope && !generatedName(c.name);
    if (c.scalar) {
      // Only the name says it is not a buffer: say so where the name is
      // not a module's weight or bias.
      if (named)
        out.push_back("initializer '" + c.name +
                      "' (one element) is trained as a parameter (a "
                      "learnable scale); pass --freeze '^" +
                      llvm::Regex::escape(c.name) + "$' if it is a buffer");
      continue;
    }
    folds.push_back(c);
    if (named && c.constant)
      constants.push_back(c.name);
  }
  for (std::string &w : torchScriptFoldsWarnings(g, folds))
    out.push_back(std::move(w));
  // A constant that is no module's weight or bias: a buffer of zeros
  // (Marian's and BART's final_logits_bias, which the logits read: trained,
  // gradient norms 3% off PyTorch's, silently) or a parameter initialised
  // to a constant (a layer scale) look the same.
  if (!constants.empty()) {
    bool many = constants.size() > 1;
    std::vector<std::string> quoted;
    for (const std::string &c : constants)
      quoted.push_back("'" + c + "'");
    out.push_back(
        std::string(many ? "initializers " : "initializer ") +
        joinNames(quoted) +
        " (one value everywhere, not a module's weight or bias) " +
        (many ? "are trained as parameters; the file cannot say whether "
                "each is one"
              : "is trained as a parameter; the file cannot say whether it "
                "is one") +
        " or a buffer (Hugging Face's final_logits_bias is a buffer): pass "
        "--freeze '^" +
        llvm::Regex::escape(constants.front()) +
        "$' for a buffer, or export with dynamo=True (torch.onnx.export's "
        "default since torch 2.9) or smp.export, whose files say");
  }
  return out;
}

} // namespace smp::onnx_frontend
