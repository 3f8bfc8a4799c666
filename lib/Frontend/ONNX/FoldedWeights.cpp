//===- FoldedWeights.cpp - PyTorch names of folded weights ----------------===//
//
// The dynamo exporter's translation reads some parameters only moved, and
// its optimiser folds the move into a new initializer (`val_37`), the
// parameter gone from the file: `aten.linear(x, W, b)` becomes MatMul(x,
// W^T) (+ b), `aten.group_norm(x, G, w, b)` normalises each group and
// then applies w and b unsqueezed to [C, 1, ...] with a Mul and an Add.
// smp trains the fold, which under an elementwise optimizer is training
// the parameter. Checkpoints would carry the fold's name and layout, which
// no PyTorch module has. Here each such fold gets an origin ("renamed")
// naming the parameter, so that `smp-checkpoint export` writes it as
// PyTorch holds it: W transposed back, w and b in their own shape [C].
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include <map>
#include <set>

namespace smp::onnx_frontend {
namespace {

/// How node n's call passes the parameter n reads as its input `input`.
struct FoldRead {
  std::string param;       // the sig target; "" if n reads no such fold
  bool transposed = false; // W^T of a Linear; else w or b unsqueezed
  bool operator==(const FoldRead &o) const {
    return param == o.param && transposed == o.transposed;
  }
};

/// The parameter node n's call passes in the place of its input `input`:
/// the weight of an `aten.linear` whose MatMul (or Gemm without transB)
/// reads it as the right operand, or the weight (Mul) or bias (Add) of an
/// `aten.group_norm`, applied after the groups are normalised.
FoldRead foldRead(const onnx::NodeProto &n, int input,
                  const std::map<std::string, std::string> &sig) {
  std::string fx = nodeMetadata(n, "pkg.torch.onnx.fx_node");
  // aten.linear(input, weight, bias); aten.group_norm(input, groups,
  // weight, bias, eps).
  size_t arg = 0;
  bool transposed = false;
  const std::string &op = n.op_type();
  if ((op == "MatMul" || op == "Gemm") && input == 1 &&
      fxCalls(fx, "aten.linear.default")) {
    for (const auto &a : n.attribute())
      if (a.name() == "transB" && a.i() != 0)
        return {};
    arg = 1;
    transposed = true;
  } else if ((op == "Mul" || op == "Add") && input < 2 &&
             fxCalls(fx, "aten.group_norm.default")) {
    arg = op == "Mul" ? 2 : 3; // None: no Mul or Add reads it
  } else {
    return {};
  }
  std::vector<std::string> args = fxArgTexts(fx);
  if (args.size() <= arg || !llvm::StringRef(args[arg]).starts_with("%"))
    return {};
  auto it = sig.find(args[arg].substr(1));
  return it == sig.end() ? FoldRead{} : FoldRead{it->second, transposed};
}

/// The fold `t` as PyTorch's parameter `read`: a matrix to transpose, or
/// [C, 1, ..., 1] to read as [C] (its shape: `torchShape`).
bool layoutFits(const onnx::TensorProto &t, const FoldRead &read,
                std::vector<int64_t> &torchShape) {
  if (read.transposed)
    return t.dims_size() == 2;
  if (t.dims_size() < 2)
    return false;
  for (int k = 1; k < t.dims_size(); ++k)
    if (t.dims(k) != 1)
      return false;
  torchShape = {t.dims(0)};
  return true;
}

} // namespace

void nameFoldedWeights(const onnx::GraphProto &g,
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
  // Fold -> the parameter every reader's call passes there (none where
  // they differ or one reads it otherwise).
  std::map<std::string, FoldRead> readOf;
  for (const auto &n : g.node())
    for (int k = 0; k < n.input_size(); ++k) {
      const std::string &in = n.input(k);
      if (!trained.count(in) || targets.count(in))
        continue;
      FoldRead r = foldRead(n, k, sig);
      auto [it, fresh] = readOf.insert({in, r});
      if (!fresh && !(it->second == r))
        it->second = {};
    }
  std::map<std::string, int> claims;
  for (const auto &[fold, r] : readOf)
    if (!r.param.empty())
      ++claims[r.param];
  for (const auto &t : g.initializer()) {
    auto it = readOf.find(t.name());
    std::vector<int64_t> torchShape;
    if (it == readOf.end() || it->second.param.empty() ||
        claims[it->second.param] != 1 || inFile.count(it->second.param) ||
        !layoutFits(t, it->second, torchShape))
      continue;
    ParamOrigin o{
        t.name(), it->second.param, "renamed", it->second.transposed, {}};
    o.torchShape = std::move(torchShape);
    o.why = it->second.transposed
                ? "the transpose of a Linear's weight, which the exporter's "
                  "optimiser folded"
                : "a GroupNorm's affine parameter, unsqueezed, which the "
                  "exporter's optimiser folded";
    origins.push_back(std::move(o));
  }
}

} // namespace smp::onnx_frontend
