//===- FxGraph.h - What the dynamo export's metadata says ------*- C++ -*-===//
//
// The dynamo exporter writes, on each node, the FX call it came from
// (`pkg.torch.onnx.fx_node`, `pkg.torch.onnx.name_scopes`) and, on the graph,
// torch.export's signature. FxGraph reads them once; FoldedParameters.cpp and
// MergedCalls.cpp use it to tell what the exporter's optimiser did to
// PyTorch's parameters.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_FRONTEND_ONNX_FXGRAPH_H
#define SMP_FRONTEND_ONNX_FXGRAPH_H

#include "SharedInitializers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace smp::onnx_frontend {

/// The `%name` tokens of an fx_node text after "args = (" (the arguments).
std::vector<std::string> fxArgs(llvm::StringRef fx);
/// The FX value an fx_node text defines (`%add_1 : ...` -> "add_1").
std::string fxDefined(llvm::StringRef fx);
/// The aten op an FX name was made from: "layer_norm_1" -> "layer_norm".
llvm::StringRef fxOp(llvm::StringRef name);
/// A lifted parameter placeholder (`%p_...`).
bool isParamArg(llvm::StringRef a);
/// A lifted parameter, buffer or constant placeholder.
bool isLiftedArg(llvm::StringRef a);
/// Up to six names, comma-separated, and the count beyond.
std::string joinNames(const std::vector<std::string> &names);
/// A refusal of a file the optimiser rewrote: names `optimize=False`.
llvm::Error refuse(llvm::StringRef path, const std::string &what);
/// The module a parameter is an attribute of ("a.b" of "a.b.weight"; ""
/// for a top-level one).
llvm::StringRef ownerModule(llvm::StringRef param);
/// Ops that only move elements, each element once (a fold of one is its
/// input's elements, rearranged).
extern const llvm::StringSet<> kBijections;
/// Ops that only move or copy elements: kBijections, copies and subsets.
bool onlyMoves(llvm::StringRef op);
/// Whether the parameter `alias` (gone from the file) is tied to the
/// parameter `read` that a node in `scopes` reads.
bool tiedAlias(llvm::StringRef alias, llvm::StringRef read,
               const std::vector<std::string> &scopes);

/// What the surviving nodes say about the FX graph.
struct FxGraph {
  std::set<std::string> defined, params, initNames, graphInputs;
  std::vector<std::string> nodeFx;
  std::map<std::string, int> producer;                   // ONNX value -> node
  std::map<std::string, std::vector<int>> foldedReaders; // FX arg -> nodes
  std::set<std::string> sigTargets;
  std::vector<std::string> vanished;          // parameters gone from the file
  std::map<std::string, std::string> aliases; // tied name -> the one read

  FxGraph(const onnx::GraphProto &g,
          const std::map<std::string, std::string> &sig)
      : nodeFx(g.node_size()), scopes(g.node_size()), g(g) {
    for (const auto &t : g.initializer())
      initNames.insert(t.name());
    for (const auto &in : g.input())
      graphInputs.insert(in.name());
    for (int i = 0; i < g.node_size(); ++i) {
      nodeFx[i] = nodeMetadata(g.node(i), "pkg.torch.onnx.fx_node");
      defined.insert(fxDefined(nodeFx[i]));
      for (const auto &o : g.node(i).output())
        producer[o] = i;
      for (const auto &a : fxArgs(nodeFx[i])) {
        if (isParamArg(a))
          params.insert(a);
        else if (!isLiftedArg(a))
          foldedReaders[a].push_back(i);
      }
    }
    for (const auto &[var, target] : sig)
      sigTargets.insert(target);
    sources = foldSources(g);
    for (const auto &[var, target] : sig) {
      if (initNames.count(target) || params.count(var))
        continue;
      std::string read = tiedAliasRead(sig, target);
      if (read.empty())
        vanished.push_back(target);
      else
        aliases[target] = read;
    }
  }

  /// Node i's modules (nodeScopes), read from its metadata once.
  const std::vector<std::string> &scopesOf(int i) {
    if (!scopes[i])
      scopes[i] = nodeScopes(g.node(i));
    return *scopes[i];
  }
  /// The innermost module node i ran in ("" if unknown).
  llvm::StringRef moduleOf(int i) {
    const std::vector<std::string> &s = scopesOf(i);
    return s.empty() ? llvm::StringRef() : llvm::StringRef(s.back());
  }

  /// Finds the folds that are a parameter only moved (Falcon's `x @
  /// self.weight.T` in its Linear, folded to `permute`): a fold of an op in
  /// kBijections whose readers all run in one module M, where M's subtree
  /// has no other fold and one parameter gone, M's own (`M.weight`). Those
  /// parameters are explained: no longer `vanished`.
  void attributeMoves() {
    std::map<std::string, std::string> readersModule; // fold -> M
    for (const auto &[name, readers] : foldedReaders) {
      if (!initNames.count(name) || sigTargets.count(name))
        continue;
      llvm::StringRef module = moduleOf(readers.front());
      if (llvm::all_of(readers, [&](int n) { return moduleOf(n) == module; }))
        readersModule[name] = module.str();
    }
    for (const auto &[fold, module] : readersModule) {
      if (module.empty() || !kBijections.contains(fxOp(fold)))
        continue;
      // No other fold is read anywhere in M's subtree.
      bool alone = llvm::all_of(foldedReaders, [&](const auto &entry) {
        return entry.first == fold || !initNames.count(entry.first) ||
               sigTargets.count(entry.first) ||
               llvm::none_of(entry.second, [&](int n) {
                 return withinModule(moduleOf(n), module);
               });
      });
      std::vector<std::string> gone;
      for (const std::string &v : vanished)
        if (withinModule(v, module))
          gone.push_back(v);
      if (alone && gone.size() == 1 && ownerModule(gone[0]) == module &&
          foldedBeyond(fold, gone[0], isBijection).empty())
        moved[fold] = gone[0];
    }
    llvm::erase_if(vanished, [&](const std::string &v) {
      return llvm::any_of(moved, [&](const auto &m) { return m.second == v; });
    });
  }
  /// What the optimiser's record of the fold `fold` (foldSources) lists
  /// besides `param` (any one parameter where `param` is empty) and FX
  /// values of the ops `allowed`: the other parameters and buffers, and
  /// the other ops (`aten.getitem`), joined by joinNames; "" where it lists
  /// nothing else or the file has no record. (A weight standardised in the
  /// forward, BiT's `batch_norm(w.view(1, out, -1)).view_as(w)`, folds to
  /// `view_1`, read as a move's fold would be; its record lists `getitem`.)
  std::string foldedBeyond(const std::string &fold, llvm::StringRef param,
                           llvm::function_ref<bool(llvm::StringRef)> allowed) {
    Record r = recordOf(fold);
    std::vector<std::string> extra;
    bool anyParam = param.empty();
    for (const std::string &t : r.tensors) {
      if (t == param)
        continue;
      if (anyParam && sigTargets.count(t))
        anyParam = false; // the one parameter allowed
      else
        extra.push_back(t);
    }
    for (const std::string &op : r.ops)
      if (!allowed(op))
        extra.push_back("aten." + op);
    return joinNames(extra);
  }
  /// What the optimiser recorded the fold `fold` was computed from
  /// (foldSources; empty where the file has no record).
  const std::vector<std::string> &sourcesOf(const std::string &fold) const {
    static const std::vector<std::string> kNone;
    auto it = sources.find(fold);
    return it == sources.end() ? kNone : it->second;
  }
  /// Whether the optimiser's record of the fold `fold` (foldSources, which
  /// lists every value the fold was computed from, folds' sources
  /// included) names no parameter: computed from constants and buffers
  /// alone (Funnel's `pad`, a mask of ones padded), no gradient reaches
  /// it. False where the file has no record.
  bool foldedWithoutParameters(const std::string &fold) const {
    const std::vector<std::string> &from = sourcesOf(fold);
    return !from.empty() && llvm::none_of(from, [&](const std::string &s) {
      return sigTargets.count(s) > 0;
    });
  }
  /// The record of the fold `fold` as "from P, B through aten.a, aten.b":
  /// its parameters and buffers, and its FX values' ops; "" where the file
  /// has none.
  std::string foldRecord(const std::string &fold) {
    if (sourcesOf(fold).empty())
      return "";
    Record r = recordOf(fold);
    if (!llvm::is_contained(r.ops, fxOp(fold).str()))
      r.ops.push_back(fxOp(fold).str());
    std::vector<std::string> ops;
    for (const std::string &op : r.ops)
      ops.push_back("aten." + op);
    return "from " +
           (r.tensors.empty() ? std::string("constants")
                              : joinNames(r.tensors)) +
           " through " + joinNames(ops);
  }

  /// A parameter gone from the file that is an attribute of the module
  /// one of the fold `name`'s readers runs in (`M.weight`), or "".
  std::string ownerOfReaders(const std::string &name) {
    auto readers = foldedReaders.find(name);
    if (readers == foldedReaders.end())
      return "";
    for (int node : readers->second) {
      llvm::StringRef module = moduleOf(node);
      for (const std::string &v : vanished)
        if (!module.empty() && ownerModule(v) == module)
          return v;
    }
    return "";
  }

  std::map<std::string, std::string> moved; // fold -> the parameter it moves
  /// A fold holds unequal rows of a gone parameter's embedding
  /// (FoldedParameters.cpp).
  bool goneVaries = false;
  std::vector<std::string> trainedMoves;    // "'fold' (parameter, aten.op)"

  /// The parameter `target` is tied to that a surviving node reads under
  /// its own name (then PyTorch's graph never used `target` itself: it is
  /// not gone, the file trains it as that parameter), or "". A read inside
  /// `target`'s module (`M.decoder.bias` for `M.bias`: Hugging Face's
  /// `self.decoder.bias = self.bias` in BERT-style LM heads) is a tie only
  /// where no node of that module's subtree reads a fold: a parameter of M
  /// that the optimiser folded would be read there, as its fold. Several
  /// parameters of that name read in M (`M.transform.dense.bias` beside
  /// BERT's `M.decoder.bias`): the one owned by M or a module of M's own
  /// (`M.decoder`), then `M.decoder`'s, else none (a guess would export
  /// another parameter's values under `target`'s name).
  std::string tiedAliasRead(const std::map<std::string, std::string> &sig,
                            llvm::StringRef target) {
    llvm::StringRef module = ownerModule(target);
    std::set<std::string> found;
    for (int i = 0; i < g.node_size(); ++i)
      for (const auto &a : fxArgs(nodeFx[i])) {
        auto read = sig.find(a);
        if (read == sig.end() || read->second == target ||
            !tiedAlias(target, read->second, scopesOf(i)))
          continue;
        if (!withinModule(read->second, module) || !foldReadWithin(module))
          found.insert(read->second);
      }
    if (found.size() > 1) // those of M or its children
      for (auto it = found.begin(); it != found.end();) {
        llvm::StringRef owner = ownerModule(*it);
        bool own = owner == module || ownerModule(owner) == module;
        it = own ? std::next(it) : found.erase(it);
      }
    // Still several (ALBERT's `M.dense.bias` beside `M.decoder.bias`): the
    // LM heads' convention, `self.decoder.bias = self.bias`.
    std::string decoder =
        (module + ".decoder." + target.rsplit('.').second).str();
    if (found.size() > 1 && found.count(decoder))
      return decoder;
    return found.size() == 1 ? *found.begin() : "";
  }
  /// Whether `name` (a parameter or module) is `module` or inside it.
  static bool withinModule(llvm::StringRef name, llvm::StringRef module) {
    return !module.empty() &&
           (name == module || name.starts_with((module + ".").str()));
  }
  /// Whether a node running in `module` or a module inside it reads a fold
  /// (an initializer named after an FX value that is no parameter's).
  bool foldReadWithin(llvm::StringRef module) {
    for (const auto &[name, readers] : foldedReaders)
      if (initNames.count(name) && !sigTargets.count(name) &&
          llvm::any_of(readers, [&](int n) {
            return withinModule(moduleOf(n), module);
          }))
        return true;
    return false;
  }

private:
  /// A fold's record split: its parameters and buffers (by target name),
  /// and the ops of its FX values ("getitem"), each once, in order; the
  /// exporter's temporaries (`val_3`) left out.
  struct Record {
    std::vector<std::string> tensors, ops;
  };
  Record recordOf(const std::string &fold) const {
    Record r;
    for (llvm::StringRef s : sourcesOf(fold)) {
      if (s.starts_with("val_"))
        continue;
      bool tensor = sigTargets.count(s.str()) || s.contains('.');
      std::string what = tensor ? s.str() : fxOp(s).str();
      std::vector<std::string> &into = tensor ? r.tensors : r.ops;
      if (!llvm::is_contained(into, what))
        into.push_back(what);
    }
    return r;
  }
  static bool isBijection(llvm::StringRef op) {
    return kBijections.contains(op);
  }
  std::map<std::string, std::vector<std::string>> sources; // foldSources
  std::vector<std::optional<std::vector<std::string>>> scopes;
  const onnx::GraphProto &g;
};

/// What a float initializer holds, for unmergeCalls's merged folds.
enum class FoldValue { Other, Constant, Sinusoid };

/// 1. Common subexpression elimination of calls (MergedCalls.cpp): copies
/// back a call merged into another where the parameters it read can be
/// told, else refuses; likewise a fold merged into another where it holds
/// a sinusoid table (`valueOf` the initializer so named).
llvm::Error unmergeCalls(onnx::GraphProto &g, llvm::StringRef path,
                         const std::map<std::string, std::string> &sig,
                         llvm::function_ref<FoldValue(llvm::StringRef)> valueOf,
                         std::vector<ParamOrigin> &origins);

/// Under training, the Identity nodes whose value PyTorch detaches
/// (DetachedValues.cpp): those the exporter wrote for `aten.detach`, and
/// ones put back where its optimiser removed them (a reader's metadata
/// passes `%detach_N`); refused where the reader's inputs cannot tell which
/// value that is.
llvm::Expected<std::set<std::string>>
stopDetachedGradients(onnx::GraphProto &g, llvm::StringRef path,
                      const std::map<std::string, std::string> &sig);

/// Under training, a warning where nodes whose calls read parameters ran
/// in code torch.export generated (stack trace `<eval_with_key>`: a
/// torch.no_grad() or torch.autocast block, inlined without a mark), or
/// nullopt (DetachedValues.cpp).
std::optional<std::string>
noGradBlockWarning(const onnx::GraphProto &g,
                   const std::map<std::string, std::string> &sig);

} // namespace smp::onnx_frontend

#endif // SMP_FRONTEND_ONNX_FXGRAPH_H
