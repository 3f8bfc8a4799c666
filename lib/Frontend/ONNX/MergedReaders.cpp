//===- MergedReaders.cpp - Nodes the dynamo optimiser shared between calls ===//
//
// The dynamo exporter's optimiser merges equal initializers (fresh biases,
// deep-copied layers' weights) and then, by common subexpression
// elimination, the equal nodes that read them. A node it made itself has no
// `pkg.torch.onnx.fx_node` metadata: nn.MultiheadAttention's cross-attention
// splits its packed bias with a `Split` the optimiser keeps (it does not
// fold multi-output ops), so every deep-copied decoder layer's split became
// one node, whose outputs every layer reads. Untying the bias alone would
// leave the layers one parameter. Here such a node is copied once per
// PyTorch parameter behind its consumers, so that each copy reads (and
// SharedInitializers.cpp unties) its own.
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include <map>
#include <set>

namespace smp::onnx_frontend {
namespace {

/// The (node, input) pairs that read node `i`'s outputs.
std::vector<std::pair<int, int>> consumersOf(const onnx::GraphProto &g, int i) {
  std::set<std::string> outs(g.node(i).output().begin(),
                             g.node(i).output().end());
  outs.erase("");
  std::vector<std::pair<int, int>> out;
  for (int c = 0; c < g.node_size(); ++c)
    for (int k = 0; k < g.node(c).input_size(); ++k)
      if (outs.count(g.node(c).input(k)))
        out.push_back({c, k});
  return out;
}

/// The PyTorch parameter named like `init` (its leaf: "in_proj_bias") of
/// the innermost module node c ran in that has one, or "".
std::string moduleParameter(const onnx::NodeProto &c, llvm::StringRef init,
                            const std::set<std::string> &targets) {
  llvm::StringRef leaf = init.rsplit('.').second;
  if (leaf.empty())
    return "";
  std::vector<std::string> modules = nodeScopes(c);
  for (auto it = modules.rbegin(); it != modules.rend(); ++it) {
    std::string name = it->empty() ? leaf.str() : *it + "." + leaf.str();
    if (targets.count(name))
      return name;
  }
  return "";
}

/// The consumers of node i grouped by moduleParameter (first-seen order);
/// empty when some consumer has none.
std::vector<std::pair<std::string, std::vector<std::pair<int, int>>>>
consumerGroups(const onnx::GraphProto &g, int i, llvm::StringRef init,
               const std::set<std::string> &targets) {
  std::vector<std::pair<std::string, std::vector<std::pair<int, int>>>> groups;
  for (auto [c, k] : consumersOf(g, i)) {
    std::string p = moduleParameter(g.node(c), init, targets);
    if (p.empty())
      return {};
    auto it =
        llvm::find_if(groups, [&](const auto &e) { return e.first == p; });
    if (it == groups.end())
      it = groups.insert(groups.end(), {p, {}});
    it->second.push_back({c, k});
  }
  return groups;
}

std::set<std::string> targetsOf(const std::map<std::string, std::string> &sig) {
  std::set<std::string> targets;
  for (const auto &[var, target] : sig)
    targets.insert(target);
  return targets;
}

} // namespace

std::string consumersParameter(const onnx::GraphProto &g, int i,
                               llvm::StringRef init,
                               const std::map<std::string, std::string> &sig) {
  auto groups = consumerGroups(g, i, init, targetsOf(sig));
  return groups.size() == 1 ? groups.front().first : "";
}

void splitMergedReaders(onnx::GraphProto &g,
                        const std::map<std::string, std::string> &sig,
                        const llvm::StringSet<> &params,
                        std::vector<ParamOrigin> &origins) {
  if (sig.empty())
    return;
  std::set<std::string> targets = targetsOf(sig);
  int nodes = g.node_size(); // the file's nodes (copies are appended)
  for (int i = 0; i < nodes; ++i) {
    const onnx::NodeProto &n = g.node(i);
    if (!nodeMetadata(n, "pkg.torch.onnx.fx_node").empty() ||
        n.op_type() == "Identity") // an exporter's copy marker
      continue;
    auto init = llvm::find_if(
        n.input(), [&](const std::string &in) { return params.contains(in); });
    if (init == n.input().end())
      continue;
    auto groups = consumerGroups(g, i, *init, targets);
    // The first group keeps the node; each other one reads a copy whose
    // outputs carry the suffix "#k".
    for (size_t k = 1; k < groups.size(); ++k) {
      std::string suffix = "#" + std::to_string(k);
      onnx::NodeProto copy = g.node(i);
      std::string base = copy.name().empty()
                             ? copy.op_type() + "_" + std::to_string(i)
                             : copy.name();
      copy.set_name(base + suffix);
      for (int o = 0; o < copy.output_size(); ++o)
        if (!copy.output(o).empty())
          copy.set_output(o, copy.output(o) + suffix);
      ParamOrigin origin{
          base + suffix, base, "cloned", false, {{i, g.node_size()}}};
      origin.why = "a node the exporter's optimiser shared between the "
                   "calls of " +
                   groups[0].first + " and " + groups[k].first;
      for (auto [c, input] : groups[k].second) {
        onnx::NodeProto *reader = g.mutable_node(c);
        reader->set_input(input, reader->input(input) + suffix);
        origin.uses.push_back({c, input});
      }
      *g.add_node() = std::move(copy);
      origins.push_back(std::move(origin));
    }
  }
}

} // namespace smp::onnx_frontend
