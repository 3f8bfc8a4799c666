//===- FoldedBatchNorms.cpp - BatchNorms an exporter folded away ----------===//
//
// Both of PyTorch's exporters can fold a BatchNorm into the convolution
// before it: the convolution then holds W * gamma / sqrt(var + eps) and the
// shifted bias, and the BN's weight, bias and running statistics are gone.
// Forward that is the module in eval() mode; trained, it is another model
// (no batch statistics), so training such a file is refused with the export
// that keeps the BatchNorms.
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <set>
#include <string>

namespace smp::onnx_frontend {
namespace {

/// The dynamo exporter's optimiser folds a BatchNorm into the convolution
/// before it (rule FuseBatchNormIntoConv), even for a module in train()
/// mode, and says so in the node's metadata. Refused naming the first
/// BatchNorm's module.
llvm::Error refuseDynamoFolds(const onnx::GraphProto &g, llvm::StringRef path) {
  const onnx::NodeProto *first = nullptr;
  int folded = 0;
  for (const auto &n : g.node())
    if (nodeMetadata(n, "pkg.onnxscript.rewriter.rule_name")
            .find("FuseBatchNormIntoConv") != std::string::npos) {
      first = first ? first : &n;
      ++folded;
    }
  if (!first)
    return llvm::Error::success();
  // The BatchNorm module: the scope before the aten call's,
  // "['', 'layer1', 'layer1.0', 'layer1.0.bn1', '_native_batch_norm_...']".
  llvm::SmallVector<llvm::StringRef> scopes;
  std::string text = nodeMetadata(*first, "pkg.torch.onnx.name_scopes");
  llvm::StringRef(text).split(scopes, ',');
  std::string module = scopes.size() >= 2
                           ? scopes[scopes.size() - 2].trim().trim("'\"").str()
                           : "";
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      path + ": the exporter's optimiser folded BatchNorm" +
          (module.empty() ? "" : " '" + module + "'") + " into node '" +
          first->name() + "' (rule FuseBatchNormIntoConv" +
          (folded > 1 ? "; " + std::to_string(folded) + " BatchNorms in all"
                      : std::string()) +
          "): its weight, bias and running statistics are gone and the "
          "convolution holds their product, so smp cannot train it as "
          "PyTorch's train() mode does; re-export with "
          "torch.onnx.export(..., optimize=False)");
}

/// The TorchScript exporter in eval() mode (torch.onnx.export's default,
/// with or without do_constant_folding) folds each BatchNorm after a
/// convolution into it and leaves no metadata: the only trace is the
/// convolution's weight and bias, which are no longer the module's
/// parameters (`c1.weight`) but values the exporter computed, named
/// `onnx::Conv_<N>`. (A conv weight computed from parameters in forward,
/// folded the same way, would not train as PyTorch trains it either.)
llvm::Error refuseTorchScriptFolds(const onnx::GraphProto &g,
                                   llvm::StringRef path) {
  std::set<std::string> inits;
  for (const auto &t : g.initializer())
    inits.insert(t.name());
  const onnx::NodeProto *first = nullptr;
  std::string weight;
  int folded = 0;
  for (const auto &n : g.node()) {
    if (n.op_type() != "Conv" && n.op_type() != "ConvTranspose")
      continue;
    for (int i = 1; i < n.input_size(); ++i)
      if (llvm::StringRef(n.input(i)).starts_with("onnx::") &&
          inits.count(n.input(i))) {
        if (!first) {
          first = &n;
          weight = n.input(i);
        }
        ++folded;
        break;
      }
  }
  if (!first)
    return llvm::Error::success();
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      path + ": " + first->op_type() + " node '" + first->name() + "' reads '" +
          weight +
          "', a value the TorchScript exporter computed, not a parameter "
          "of the module" +
          (folded > 1 ? " (" + std::to_string(folded) + " convolutions in all)"
                      : std::string()) +
          ": in eval() mode torch.onnx.export folds each BatchNorm into the "
          "convolution before it (also with do_constant_folding=False), so "
          "training this file would train the model without its "
          "BatchNorms; re-export with torch.onnx.export(..., "
          "training=torch.onnx.TrainingMode.TRAINING) (torch 2: or "
          "dynamo=True, optimize=False)");
}

} // namespace

llvm::Error refuseFoldedBatchNorms(const onnx::GraphProto &g,
                                   llvm::StringRef path) {
  if (auto err = refuseDynamoFolds(g, path))
    return err;
  return refuseTorchScriptFolds(g, path);
}

} // namespace smp::onnx_frontend
