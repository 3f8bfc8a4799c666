//===- ScalarParameters.cpp - One-element initializers that are trained ---===//
//
// Float initializers of more than one element are parameters; a one-element
// one is a constant unless the file says it is PyTorch state (under
// --train): nn.PReLU()'s slope, a learnable 0-D scale. smpc used to make
// every one of them a constant, so PReLU slopes and learnable scales never
// trained, silently. The rules (docs/bring-your-own-model.md) and the
// exporters' names they read live here; SharedInitializers.cpp applies them.
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include "llvm/Support/Regex.h"

#include <map>

namespace smp::onnx_frontend {

bool generatedName(llvm::StringRef n) {
  return n.starts_with("onnx::") || n.starts_with("val_") ||
         n.starts_with("_val_") || n.empty();
}

/// Whether a one-element float initializer is a trained parameter (under
/// --train; other one-element initializers are constants): with an
/// smp.export sidecar, one it maps to a state_dict key (`exported`; its
/// buffers are frozen by name); with the dynamo exporter's graph signature,
/// one it lists as a PARAMETER (`sigTargets`); in other files (TorchScript
/// keeps constants in Constant nodes), one named as a PyTorch state_dict key
/// (`alpha`, `act.0.weight`: nn.PReLU's slope, a learnable scale), not a
/// name an exporter made up.
bool scalarParameter(llvm::StringRef n,
                     const std::optional<llvm::StringSet<>> &exported,
                     const std::set<std::string> &sigTargets) {
  if (exported)
    return exported->contains(n);
  if (!sigTargets.empty())
    return sigTargets.count(n.str()) != 0;
  static const llvm::Regex stateKey(
      "^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z0-9_]+)*$");
  return !generatedName(n) && stateKey.match(n);
}

/// The initializers PRelu nodes read as their slope, directly or through
/// an Identity copy. nn.PReLU's slope is a parameter; on inputs of rank 3
/// or more torch.onnx.export's constant folding stores it unsqueezed
/// (`onnx::PRelu_20`, [1, 1]) and drops the parameter's own initializer:
/// the same values, trained exactly as it (only the name differs).
std::set<std::string> preluSlopes(const onnx::GraphProto &g) {
  std::map<std::string, std::string> copyOf;
  for (const auto &n : g.node())
    if (n.op_type() == "Identity" && n.input_size() == 1 &&
        n.output_size() == 1)
      copyOf[n.output(0)] = n.input(0);
  std::set<std::string> out;
  for (const auto &n : g.node()) {
    if (n.op_type() != "PRelu" ||
        !(n.domain().empty() || n.domain() == "ai.onnx") || n.input_size() < 2)
      continue;
    std::string slope = n.input(1);
    if (auto it = copyOf.find(slope); it != copyOf.end())
      slope = it->second;
    out.insert(slope);
  }
  return out;
}

} // namespace smp::onnx_frontend
