//===- FoldedLinearWeights.cpp - PyTorch names of folded Linear weights ---===//
//
// The dynamo exporter translates `aten.linear(x, W, b)` into MatMul(x, W^T)
// (+ b) and its optimiser folds W^T into a new initializer (`val_37`): the
// parameter W is gone from the file and smp trains the fold, which under an
// elementwise optimizer is training W. Checkpoints would carry the fold's
// name and layout, which no PyTorch module has. Here each such fold gets an
// origin ("renamed") naming W, so that `smp-checkpoint export` writes it as
// PyTorch holds it: W, transposed back.
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include <map>
#include <set>

namespace smp::onnx_frontend {
namespace {

/// The weight parameter (sig target) of node n's call when n reads `init`
/// as the right operand of a plain matrix product (MatMul, or Gemm without
/// transB) and the call is `aten.linear`; "" otherwise.
std::string linearWeightRead(const onnx::NodeProto &n, int input,
                             const std::map<std::string, std::string> &sig) {
  if (input != 1 || (n.op_type() != "MatMul" && n.op_type() != "Gemm"))
    return "";
  for (const auto &a : n.attribute())
    if (a.name() == "transB" && a.i() != 0)
      return "";
  std::string fx = nodeMetadata(n, "pkg.torch.onnx.fx_node");
  if (fx.find("target=torch.ops.aten.linear.default") == std::string::npos)
    return "";
  // aten.linear(input, weight, bias): the second argument.
  std::vector<std::string> args = fxArgs(fx, "%", ",) ]}");
  if (args.size() < 2)
    return "";
  auto it = sig.find(args[1]);
  return it == sig.end() ? "" : it->second;
}

} // namespace

void nameFoldedLinearWeights(const onnx::GraphProto &g,
                             const std::map<std::string, std::string> &sig,
                             const std::set<std::string> &trained,
                             std::vector<ParamOrigin> &origins) {
  if (sig.empty())
    return;
  std::set<std::string> inFile, targets;
  for (const auto &t : g.initializer())
    inFile.insert(t.name());
  for (const auto &[var, target] : sig)
    targets.insert(target);
  // Fold -> the weight every reader's call names ("" where they differ or
  // one reads it otherwise).
  std::map<std::string, std::string> weightOf;
  for (const auto &n : g.node())
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string &in = n.input(k);
      if (!trained.count(in) || targets.count(in))
        continue;
      std::string w = linearWeightRead(n, k, sig);
      auto [it, fresh] = weightOf.insert({in, w});
      if (!fresh && it->second != w)
        it->second.clear();
    }
  std::map<std::string, int> claims;
  for (const auto &[fold, w] : weightOf)
    if (!w.empty())
      ++claims[w];
  for (const auto &t : g.initializer()) {
    auto it = weightOf.find(t.name());
    if (it == weightOf.end() || it->second.empty() || t.dims_size() != 2 ||
        claims[it->second] != 1 || inFile.count(it->second))
      continue;
    ParamOrigin o{t.name(), it->second, "renamed", true, {}};
    o.why = "the transpose of a Linear's weight, which the exporter's "
            "optimiser folded";
    origins.push_back(std::move(o));
  }
}

} // namespace smp::onnx_frontend
