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

/// The inputs of node i that may be the values its call passes as the
/// detached FX values (inputs its metadata does not explain). A single-node
/// call with one input per `%` argument reads them in order: exactly the
/// detached ones. Otherwise each input is matched to an argument: made by a
/// node of the same call (internal), a parameter the call passes, a
/// constant, or a value of another call that the call passes; what is left
/// may be detached (the caller checks the call's nodes together: a linear
/// call's Add reads none of them, its MatMul the detached input).
std::vector<int> detachedInputs(FxGraph &fx, const onnx::GraphProto &g,
                                const std::map<std::string, std::string> &varOf,
                                int i, const std::vector<std::string> &args,
                                const std::vector<std::string> &undefinedArgs,
                                bool positional) {
  const onnx::NodeProto &n = g.node(i);
  std::vector<int> inputs;
  if (positional) {
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
  return inputs;
}

/// The detached inputs found for one call (its nodes' metadata text).
struct DetachedCall {
  int firstNode = -1;
  std::vector<std::string> undefinedArgs;
  bool positional = true;                  // every node read in order
  std::vector<std::pair<int, int>> inputs; // (node, input index)
};

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
  std::map<std::string, DetachedCall> calls; // by the call's metadata
  std::vector<std::string> order;            // the calls, first seen first
  for (int i = 0; i < g.node_size(); ++i) {
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
    auto [it, fresh] = calls.try_emplace(text);
    DetachedCall &call = it->second;
    if (fresh) {
      call.firstNode = i;
      call.undefinedArgs = undefinedArgs;
      order.push_back(text);
    }
    bool positional = callNodes[text] == 1 &&
                      g.node(i).input_size() == static_cast<int>(args.size());
    call.positional = call.positional && positional;
    for (int k :
         detachedInputs(fx, g, varOf, i, args, undefinedArgs, positional))
      call.inputs.push_back({i, k});
  }
  std::set<std::string> made; // the Identity nodes put back (value#detach)
  for (const std::string &text : order) {
    const DetachedCall &call = calls[text];
    // Every undefined argument a detach, and as many detached values as
    // detaches (a value the call's nodes read twice counts once), unless
    // the one node's inputs are its arguments in order.
    std::set<std::string> detaches, values;
    for (const std::string &a : call.undefinedArgs)
      if (fxOp(a) == "detach")
        detaches.insert(a);
    for (auto [node, k] : call.inputs)
      values.insert(g.node(node).input(k));
    if (values.empty() ||
        (!call.positional && (detaches.size() != call.undefinedArgs.size() ||
                              values.size() != detaches.size())))
      return refuse(path, "node '" + g.node(call.firstNode).name() +
                              "' reads " + joinNames(call.undefinedArgs) +
                              " where PyTorch detaches a value (.detach(): no "
                              "gradient flows back through it), and the "
                              "exporter's optimiser removed the detach: smp "
                              "cannot tell which of the node's inputs it is");
    for (auto [node, k] : call.inputs) {
      std::string v = g.node(node).input(k);
      std::string out = v + "#detach";
      if (made.insert(out).second) {
        onnx::NodeProto *id = g.add_node();
        id->set_op_type("Identity");
        id->set_name(out);
        id->add_input(v);
        id->add_output(out);
        stops.insert(out);
      }
      g.mutable_node(node)->set_input(k, out);
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
