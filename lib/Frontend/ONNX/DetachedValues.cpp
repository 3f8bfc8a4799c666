//===- DetachedValues.cpp - Gradients PyTorch stops with .detach() --------===//
//
// `x.detach()` computes x and stops its gradient (a straight-through
// estimator's `h + (q(h) - h).detach()`, a stop-gradient branch). ONNX has
// no such op: the dynamo exporter writes an Identity (its metadata
// `aten.detach.default`), which its optimiser removes, leaving `%detach` in
// its readers' metadata. Trained as the file reads, the gradient PyTorch
// stops would flow. stopDetachedGradients names the Identity nodes that
// detach, putting one back where the optimiser removed it; the importer
// makes each an smp.cast marked smp.no_grad (autodiff treats its result as
// a constant; smp-build-gradients removes the cast once the gradients are
// built).
//
//===----------------------------------------------------------------------===//

#include "FxGraph.h"

#include "llvm/ADT/STLExtras.h"

namespace smp::onnx_frontend {
namespace {

/// The inputs of node i that are the values its call passes as the
/// detached FX values `detached` (candidates: inputs its metadata does not
/// explain), or nullopt where that cannot be told. A single-node call with
/// one input per `%` argument reads them in order; otherwise each input is
/// matched to an argument: made by a node of the same call (internal), a
/// parameter the call passes, a constant, or a value of another call that
/// the call passes. What is left are the detached values.
std::optional<std::vector<int>>
detachedInputs(FxGraph &fx, const onnx::GraphProto &g,
               const std::map<std::string, std::string> &varOf, int i,
               const std::vector<std::string> &args,
               const std::vector<std::string> &undefinedArgs, int callNodes) {
  const onnx::NodeProto &n = g.node(i);
  size_t detached = llvm::count_if(
      undefinedArgs, [](const std::string &a) { return fxOp(a) == "detach"; });
  std::vector<int> inputs;
  if (callNodes == 1 && n.input_size() == static_cast<int>(args.size())) {
    for (int k = 0; k < n.input_size(); ++k)
      if (llvm::is_contained(undefinedArgs, args[k]) &&
          fxOp(args[k]) == "detach")
        inputs.push_back(k);
    return inputs;
  }
  std::multiset<std::string> available(args.begin(), args.end());
  auto consume = [&](const std::string &a) {
    auto it = available.find(a);
    if (it == available.end())
      return false;
    available.erase(it);
    return true;
  };
  for (int k = 0; k < n.input_size(); ++k) {
    const std::string &v = n.input(k);
    if (v.empty())
      continue;
    if (fx.initNames.count(v)) {
      auto var = varOf.find(v);
      if (var != varOf.end() && !consume(var->second))
        inputs.push_back(k); // a parameter the call does not pass
      continue;
    }
    if (fx.graphInputs.count(v)) {
      consume(v);
      continue;
    }
    auto p = fx.producer.find(v);
    if (p == fx.producer.end() || fx.nodeFx[p->second] == fx.nodeFx[i] ||
        consume(fxDefined(fx.nodeFx[p->second])))
      continue;
    inputs.push_back(k);
  }
  // Every undefined argument a detach, one input each.
  if (detached != undefinedArgs.size() || inputs.size() != detached)
    return std::nullopt;
  return inputs;
}

} // namespace

llvm::Expected<std::set<std::string>>
stopDetachedGradients(onnx::GraphProto &g, llvm::StringRef path,
                      const std::map<std::string, std::string> &sig) {
  std::set<std::string> stops;
  if (sig.empty())
    return stops;
  FxGraph fx(g, sig);
  std::map<std::string, std::string> varOf; // parameter -> its FX name
  for (const auto &[var, target] : sig)
    varOf[target] = var;
  std::map<std::string, int> callNodes; // fx_node text -> its nodes
  for (const std::string &text : fx.nodeFx)
    if (!text.empty())
      ++callNodes[text];
  std::map<std::string, std::string> made; // value#detach -> its Identity
  int original = g.node_size();
  for (int i = 0; i < original; ++i) {
    const std::string &text = fx.nodeFx[i];
    if (g.node(i).op_type() == "Identity" &&
        fxCalls(text, "aten.detach.default")) {
      stops.insert(g.node(i).name()); // kept (optimize=False)
      continue;
    }
    std::vector<std::string> args = fxArgs(text), undefinedArgs;
    for (const std::string &a : args)
      if (!isLiftedArg(a) && !fx.defined.count(a) && !fx.initNames.count(a) &&
          !fx.graphInputs.count(a))
        undefinedArgs.push_back(a);
    if (llvm::none_of(undefinedArgs,
                      [](const std::string &a) { return fxOp(a) == "detach"; }))
      continue;
    auto inputs =
        detachedInputs(fx, g, varOf, i, args, undefinedArgs, callNodes[text]);
    if (!inputs || inputs->empty())
      return refuse(path, "node '" + g.node(i).name() + "' reads " +
                              joinNames(undefinedArgs) +
                              " where PyTorch detaches a value (.detach(): no "
                              "gradient flows back through it), and the "
                              "exporter's optimiser removed the detach: smp "
                              "cannot tell which of the node's inputs it is");
    for (int k : *inputs) {
      std::string v = g.node(i).input(k);
      std::string out = v + "#detach";
      if (!made.count(out)) {
        onnx::NodeProto *id = g.add_node();
        id->set_op_type("Identity");
        id->set_name(out);
        id->add_input(v);
        id->add_output(out);
        made[out] = id->name();
        stops.insert(id->name());
      }
      g.mutable_node(i)->set_input(k, out);
    }
  }
  return stops;
}

std::optional<std::string>
noGradBlockWarning(const onnx::GraphProto &g,
                   const std::map<std::string, std::string> &sig) {
  std::vector<std::string> nodes, params;
  for (const auto &n : g.node()) {
    if (!llvm::StringRef(nodeMetadata(n, "pkg.torch.onnx.stack_trace"))
             .starts_with("File \"<eval_with_key>"))
      continue;
    bool reads = false;
    for (const std::string &a :
         fxArgs(nodeMetadata(n, "pkg.torch.onnx.fx_node")))
      if (auto t = sig.find(a); isParamArg(a) && t != sig.end()) {
        reads = true;
        if (!llvm::is_contained(params, t->second))
          params.push_back(t->second);
      }
    if (reads)
      nodes.push_back(n.name());
  }
  if (nodes.empty())
    return std::nullopt;
  return "node(s) " + joinNames(nodes) + " read PyTorch parameter(s) " +
         joinNames(params) +
         " in code torch.export generated (their stack trace is "
         "\"<eval_with_key>\"): a `with torch.no_grad():` or "
         "`torch.autocast` block, which the exporter inlines without a "
         "mark. If it is torch.no_grad(), PyTorch trains nothing through "
         "it and smp does: write the block's result as `(...).detach()`, "
         "which smp sees, and export again";
}

} // namespace smp::onnx_frontend
