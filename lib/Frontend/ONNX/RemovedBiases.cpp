//===- RemovedBiases.cpp - Zero biases the dynamo optimiser removed -------===//
//
// The dynamo exporter's optimiser drops a Linear's or a convolution's bias
// that is all zeros at export; PyTorch trains it. Under training it is put
// back from the node's metadata (see docs/bring-your-own-model.md).
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include "TensorData.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

#include <map>
#include <string>
#include <vector>

namespace smp::onnx_frontend {

/// A dynamo export whose metadata a tool removed (onnx's version converter
/// drops every node's and the graph's: torch.onnx.export goes through it
/// for opset_version 26 and above; the caller checked strippedDynamoExport)
/// still has the optimiser's removals in it, but nothing names the
/// parameters: a Gemm left with two inputs (every one in the dynamo exports
/// of the fixtures carries the rule RemoveOptionalBiasFromGemm; the
/// exporter writes a bias-free linear as MatMul) lost a zero bias PyTorch
/// trains (GPT-2's: 25% off PyTorch's gradient norm at step 1).
llvm::Error refuseStrippedRemovals(const onnx::GraphProto &g,
                                   llvm::StringRef path) {
  for (const auto &n : g.node()) {
    if (n.op_type() != "Gemm" || (n.input_size() > 2 && !n.input(2).empty()))
      continue;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        path + ": node '" + n.name() +
            "' (Gemm) has no bias, as the dynamo exporter's optimiser leaves "
            "a Linear whose bias was all zeros when exported (fresh Hugging "
            "Face models' are), but the exporter's metadata that names that "
            "parameter is gone from this file (a tool removed it: onnx's "
            "version converter does, which torch.onnx.export uses for "
            "opset_version 26 and above), so smp cannot put it back and "
            "would train a model without it; export with opset_version 25 "
            "or lower and do not convert the file, or export with "
            "torch.onnx.export(..., optimize=False) or dynamo=False");
  }
  return llvm::Error::success();
}

/// The dynamo exporter's optimiser removes a Linear's or a convolution's
/// bias that is all zeros at export (rules RemoveOptionalBiasFromGemm,
/// RemoveOptionalBiasFromConv: HF ViT's patch embedding); PyTorch trains that
/// bias. Its metadata names the parameter, so the bias is put back as a
/// zero-initialised parameter under that name (exact: it was zero). A
/// removal smp cannot undo is refused.
llvm::Error restoreRemovedBiases(onnx::GraphProto &g, llvm::StringRef path,
                                 const std::map<std::string, std::string> &sig,
                                 std::vector<ParamOrigin> &origins) {
  std::map<std::string, std::string> params = sig;
  llvm::StringSet<> names;
  for (const auto &t : g.initializer())
    names.insert(t.name());
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto &n = *g.mutable_node(i);
    std::string rule = nodeMetadata(n, "pkg.onnxscript.rewriter.rule_name");
    if (rule.find("RemoveOptionalBias") == std::string::npos)
      continue;
    // aten.linear(x, weight, bias), aten.conv<N>d / aten.convolution(x,
    // weight, bias, ...); aten.addmm(bias, x, weight) (HF's Conv1D). A
    // removal in any other call is refused: smp cannot tell what it was.
    std::string fx = nodeMetadata(n, "pkg.torch.onnx.fx_node");
    llvm::StringRef call = llvm::StringRef(fx).split("target=").second;
    llvm::StringRef args =
        llvm::StringRef(fx).split("args = (").second.rsplit("), kwargs").first;
    llvm::SmallVector<llvm::StringRef> parts;
    args.split(parts, ',');
    bool conv = call.starts_with("torch.ops.aten.conv") ||
                call.starts_with("torch.ops.aten.convolution");
    bool addmm = call.starts_with("torch.ops.aten.addmm");
    bool known = conv || addmm || call.starts_with("torch.ops.aten.linear");
    size_t biasArg = addmm ? 0 : 2;
    llvm::StringRef bias = known && biasArg < parts.size()
                               ? parts[biasArg].trim().split(')').first.trim()
                               : llvm::StringRef();
    // A call without a bias (CLIP's patch embedding: Conv2d(bias=False),
    // its bias argument None): the exporter's translation gave the node a
    // zero bias, which the rule removed; no parameter is gone.
    if (known && (bias.empty() || bias == "None"))
      continue;
    if (!bias.consume_front("%p_"))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path + ": the exporter's optimiser removed an input of node '" +
              n.name() + "' (rule " + rule +
              ") in a call smp does not recognise (" +
              call.split(']').first.str() +
              "), so it cannot tell which parameter is gone and would train a "
              "model without it; re-export with torch.onnx.export(..., "
              "optimize=False) or with dynamo=False");
    std::string var = "p_" + bias.str();
    std::string name =
        params.count(var) ? params[var] : bias.str() + " (torch.export name)";
    auto refuse = [&](const std::string &why) {
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path + ": the exporter's optimiser removed parameter '" + name +
              "' from node '" + n.name() + "' (rule " + rule +
              ": the bias was all zeros when exported) and smp cannot put "
              "it back (" +
              why +
              "), so it would train a model without "
              "it; re-export with torch.onnx.export(..., optimize=False) or "
              "with dynamo=False");
    };
    // The bias already back, an initializer named after the parameter (a
    // file smp's --save-onnx wrote from a trained one): nothing is gone.
    if (n.input_size() == 3 && names.contains(n.input(2)) &&
        (n.input(2) == name ||
         llvm::StringRef(n.input(2)).starts_with(name + "#")))
      continue;
    const onnx::TensorProto *weight = nullptr;
    for (const auto &t : g.initializer())
      if (n.input_size() == 2 && t.name() == n.input(1))
        weight = &t;
    int64_t cols;
    if (conv) {
      // Conv(X, W) with the bias B gone: B is [M], M = W's first dim.
      if (n.op_type() != "Conv" || n.input_size() != 2)
        return refuse("not a Conv with two inputs");
      if (!weight || weight->dims_size() < 3)
        return refuse("its weight is not a convolution kernel initializer");
      cols = weight->dims(0);
    } else {
      // Gemm(A, B) with the bias C gone: C is [N], N from B.
      if (n.op_type() != "Gemm" || n.input_size() != 2)
        return refuse("not a Gemm with two inputs");
      if (!weight || weight->dims_size() != 2)
        return refuse("its weight is not a matrix initializer");
      int64_t transB = 0;
      float beta = 1;
      for (const auto &a : n.attribute()) {
        if (a.name() == "transB")
          transB = a.i();
        if (a.name() == "beta")
          beta = a.f();
      }
      if (beta != 1)
        return refuse("beta is not 1");
      cols = weight->dims(transB ? 0 : 1);
    }
    std::string fresh = params.count(var) ? name : bias.str();
    for (int k = 1; names.count(fresh); ++k)
      fresh = (params.count(var) ? name : bias.str()) + "#" + std::to_string(k);
    names.insert(fresh);
    onnx::TensorProto *zero = g.add_initializer();
    zero->set_name(fresh);
    zero->set_data_type(weight->data_type());
    zero->add_dims(cols);
    int64_t es = elementSize(weight->data_type());
    zero->set_raw_data(std::string(static_cast<size_t>(cols * es), '\0'));
    n.add_input(fresh);
    origins.push_back({fresh, "", "restored", false, {{i, 2}}});
  }
  return llvm::Error::success();
}

} // namespace smp::onnx_frontend
