//===- FoldedParameters.cpp - Parameters the dynamo optimiser folded ------===//
//
// The dynamo exporter's optimiser folds every computation whose inputs are
// constant at export: an embedding gathered at constant positions (BERT's
// position and token-type embeddings, OPT's positions) becomes one
// initializer named after the folded FX node (`embedding_1`), so does a
// parameter broadcast or tiled over a fixed batch (ViT's class token:
// `expand`; `.repeat()`: `repeat_1`), and common
// subexpression elimination merges two calls that read equal fresh tensors
// (GPT-NeoX's two LayerNorms of one input). Both drop PyTorch parameters
// from the file. This file finds them from the node metadata
// (`pkg.torch.onnx.fx_node`) and the graph signature, trains what can be
// trained as PyTorch trains it, and refuses the rest (see
// docs/bring-your-own-model.md).
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include "TensorData.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

namespace smp::onnx_frontend {
namespace {

/// The `%name` tokens of an fx_node text after "args = (" (the arguments).
std::vector<std::string> fxArgs(llvm::StringRef fx) {
  return smp::onnx_frontend::fxArgs(fx, "%", ",) ]}");
}

/// The FX value an fx_node text defines (`%add_1 : ...` -> "add_1").
std::string fxDefined(llvm::StringRef fx) {
  if (!fx.consume_front("%"))
    return "";
  return fx.split(' ').first.str();
}

/// The aten op an FX name was made from: "layer_norm_1" -> "layer_norm".
llvm::StringRef fxOp(llvm::StringRef name) {
  auto [head, tail] = name.rsplit('_');
  if (!tail.empty() && llvm::all_of(tail, llvm::isDigit))
    return head;
  return name;
}

bool isParamArg(llvm::StringRef a) { return a.starts_with("p_"); }
bool isLiftedArg(llvm::StringRef a) {
  return a.starts_with("p_") || a.starts_with("b_") || a.starts_with("c_");
}

std::string joinNames(const std::vector<std::string> &names) {
  std::string list;
  for (size_t k = 0; k < names.size() && k < 6; ++k)
    list += (k ? ", " : "") + names[k];
  if (names.size() > 6)
    list += ", ... (" + std::to_string(names.size()) + " in all)";
  return list;
}

llvm::Error refuse(llvm::StringRef path, const std::string &what) {
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      path + ": " + what +
          "; smp would train another model: re-export with "
          "torch.onnx.export(..., optimize=False)");
}

/// The rows of an initializer as [rows x rowBytes] and the distinct ones in
/// first-appearance order: `index[r]` is the distinct row of row r.
struct Rows {
  int64_t rows = 0, rowBytes = 0;
  std::vector<int64_t> index;
  std::vector<int64_t> firstOf; // distinct row -> first row holding it
};

Rows distinctRows(const std::string &bytes, int64_t rowBytes) {
  Rows r;
  r.rowBytes = rowBytes;
  r.rows = rowBytes ? static_cast<int64_t>(bytes.size()) / rowBytes : 0;
  std::map<llvm::StringRef, int64_t> seen;
  for (int64_t i = 0; i < r.rows; ++i) {
    llvm::StringRef row(bytes.data() + i * rowBytes, rowBytes);
    auto [it, fresh] = seen.insert({row, (int64_t)r.firstOf.size()});
    if (fresh)
      r.firstOf.push_back(i);
    r.index.push_back(it->second);
  }
  return r;
}

bool constantRow(llvm::StringRef row, int64_t es) {
  for (size_t k = es; k < row.size(); k += es)
    if (std::memcmp(row.data() + k, row.data(), es) != 0)
      return false;
  return true;
}

/// The row is k > 1 copies of a shorter run (a repeat along the last dim:
/// its copies are one parameter, which distinct rows would train apart).
bool periodicRow(llvm::StringRef row, int64_t es) {
  size_t n = row.size() / es;
  for (size_t d = 1; d < n; ++d)
    if (n % d == 0 &&
        std::memcmp(row.data(), row.data() + d * es, (n - d) * es) == 0)
      return true;
  return false;
}

/// The module a parameter is an attribute of ("a.b" of "a.b.weight"; ""
/// for a top-level one).
llvm::StringRef ownerModule(llvm::StringRef param) {
  auto [module, leaf] = param.rsplit('.');
  return leaf.empty() ? llvm::StringRef() : module;
}

/// Whether the parameter `alias` (gone from the file) is tied to the
/// parameter `read`: a node of `alias`'s own module reads `read`, a
/// parameter of another module (HF's tied input embedding: the embedding
/// module's gather reads `lm_head.weight`, torch.export having kept one
/// name for the shared tensor).
bool tiedAlias(llvm::StringRef alias, llvm::StringRef read,
               const std::vector<std::string> &scopes) {
  auto [module, leaf] = alias.rsplit('.');
  if (leaf.empty() || read.rsplit('.').second != leaf ||
      read.starts_with((module + ".").str()))
    return false;
  return llvm::is_contained(scopes, module);
}

/// Ops that only move elements, each element once (a fold of one is its
/// input's elements, rearranged).
const llvm::StringSet<> kBijections = {
    "t",         "transpose", "permute", "view",      "reshape", "_unsafe_view",
    "unsqueeze", "squeeze",   "clone",   "contiguous"};
/// Ops that only move or copy elements: kBijections, copies and subsets.
bool onlyMoves(llvm::StringRef op) {
  static const llvm::StringSet<> kCopiesAndSubsets = {
      "expand", "repeat", "embedding", "select", "slice"};
  return kBijections.contains(op) || kCopiesAndSubsets.contains(op);
}

/// What the surviving nodes say about the FX graph.
struct FxGraph {
  std::set<std::string> defined, params, initNames, graphInputs;
  std::vector<std::string> nodeFx;
  std::map<std::string, int> producer;                   // ONNX value -> node
  std::map<std::string, std::vector<int>> foldedReaders; // FX arg -> nodes
  std::set<std::string> sigTargets;
  std::vector<std::string> vanished; // parameters gone from the file
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
    for (const auto &[var, target] : sig) {
      sigTargets.insert(target);
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
    auto within = [](llvm::StringRef name, llvm::StringRef module) {
      return name == module || name.starts_with((module + ".").str());
    };
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
                 return within(moduleOf(n), module);
               });
      });
      std::vector<std::string> gone;
      for (const std::string &v : vanished)
        if (within(v, module))
          gone.push_back(v);
      if (alone && gone.size() == 1 && ownerModule(gone[0]) == module)
        moved[fold] = gone[0];
    }
    llvm::erase_if(vanished, [&](const std::string &v) {
      return llvm::any_of(moved, [&](const auto &m) { return m.second == v; });
    });
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
  std::vector<std::string> trainedMoves;    // "'fold' (parameter, aten.op)"

  /// The parameter `target` is tied to that a surviving node reads under
  /// its own name (then PyTorch's graph never used `target` itself: it is
  /// not gone, the file trains it as that parameter), or "".
  std::string tiedAliasRead(const std::map<std::string, std::string> &sig,
                            llvm::StringRef target) {
    for (int i = 0; i < g.node_size(); ++i)
      for (const auto &a : fxArgs(nodeFx[i])) {
        auto read = sig.find(a);
        if (read != sig.end() && read->second != target &&
            tiedAlias(target, read->second, scopesOf(i)))
          return read->second;
      }
    return "";
  }

private:
  std::vector<std::optional<std::vector<std::string>>> scopes;
  const onnx::GraphProto &g;
};

/// A call common subexpression elimination merged into another: readers
/// (node, input) read `producer`'s output where PyTorch passed the call's
/// own value.
struct MergedCall {
  int producer = -1;
  std::vector<std::pair<int, int>> readers;
};

/// The module owning all of `params` (sig targets), or "" if they differ.
std::string commonOwner(const std::vector<std::string> &params) {
  std::string owner;
  for (const std::string &p : params) {
    std::string o = ownerModule(p).str();
    if (!owner.empty() && o != owner)
      return "";
    owner = o;
  }
  return owner;
}

/// The module M' whose gone parameters the merged call `call` read: of the
/// modules (not `skip`) whose gone parameters' leaves are exactly `leaves`
/// and not yet `claimed`, the one alone in the innermost module of a
/// reader that holds any; every reader must agree. "" if none or several.
std::string mergedCallModule(FxGraph &fx, const MergedCall &call,
                             const std::set<std::string> &leaves,
                             llvm::StringRef skip,
                             const std::set<std::string> &claimed) {
  std::map<std::string, std::set<std::string>> goneLeaves;
  for (const std::string &v : fx.vanished)
    if (!claimed.count(v))
      goneLeaves[ownerModule(v).str()].insert(v.substr(v.rfind('.') + 1));
  std::string found;
  for (auto [reader, input] : call.readers) {
    const std::vector<std::string> &scopes = fx.scopesOf(reader);
    std::string pick;
    for (auto s = scopes.rbegin(); s != scopes.rend() && pick.empty(); ++s) {
      std::vector<std::string> in;
      for (const auto &[module, l] : goneLeaves)
        if (module != skip && l == leaves &&
            (s->empty() || module.rfind(*s + ".", 0) == 0))
          in.push_back(module);
      if (in.size() > 1)
        return "";
      if (in.size() == 1)
        pick = in[0];
    }
    if (pick.empty() || (!found.empty() && pick != found))
      return "";
    found = pick;
  }
  return found;
}

/// What a refusal of a merged call says: node `n` reads `v` where PyTorch
/// computes `b`, and the parameters gone.
std::string mergedCallText(const onnx::NodeProto &n, const std::string &v,
                           const std::string &b,
                           const std::vector<std::string> &vanished) {
  return "node '" + n.name() + "' reads '" + v + "' where PyTorch computes '" +
         b + "': the exporter's optimiser merged two " + fxOp(b).str() +
         " calls whose parameters were equal when exported, so PyTorch "
         "parameter(s) " +
         joinNames(vanished) + " are gone from the file";
}

/// The innermost module holding both modules ("" for the root).
std::string commonAncestor(llvm::StringRef a, llvm::StringRef b) {
  std::string common;
  llvm::SmallVector<llvm::StringRef> pa, pb;
  a.split(pa, '.');
  b.split(pb, '.');
  for (size_t k = 0; k < pa.size() && k < pb.size() && pa[k] == pb[k]; ++k)
    common += (common.empty() ? "" : ".") + pa[k].str();
  return common;
}

/// 1. Common subexpression elimination of a call that reads parameters:
/// node N reads value V (made by the call %A, node P) where PyTorch passed
/// %B, a call of the same op that no node makes any more (GPT-NeoX's input
/// and post-attention LayerNorms of one input, equal when fresh). Where the
/// parameters %B read can be told (mergedCallModule: exactly those gone
/// from the file in one module, nearest its readers, and no other
/// parameter gone beside them), P is copied to compute %B from copies of
/// its parameter initializers named as %B's: they were equal, which is why
/// the calls merged. Otherwise refused.
llvm::Error unmergeCalls(onnx::GraphProto &g, llvm::StringRef path,
                         const std::map<std::string, std::string> &sig,
                         std::vector<ParamOrigin> &origins) {
  FxGraph fx(g, sig);
  fx.attributeMoves();                      // a moved parameter is not gone
  std::map<std::string, MergedCall> merged; // %B -> its readers
  for (int i = 0; i < g.node_size(); ++i) {
    std::vector<std::string> args = fxArgs(fx.nodeFx[i]);
    for (const auto &b : args) {
      if (isLiftedArg(b) || fx.defined.count(b) || fx.initNames.count(b) ||
          fx.graphInputs.count(b))
        continue;
      for (int k = 0; k < g.node(i).input_size(); ++k) {
        const std::string &v = g.node(i).input(k);
        auto p = fx.producer.find(v);
        if (p == fx.producer.end())
          continue;
        std::string a = fxDefined(fx.nodeFx[p->second]);
        if (a.empty() || a == b || fxOp(a) != fxOp(b) ||
            llvm::none_of(fxArgs(fx.nodeFx[p->second]), isParamArg))
          continue;
        MergedCall &call = merged[b];
        // The node reads %A too (which input is which?), or %B's readers
        // read different nodes.
        if (llvm::is_contained(args, a) ||
            (call.producer >= 0 && call.producer != p->second))
          return refuse(path, mergedCallText(g.node(i), v, b, fx.vanished));
        call.producer = p->second;
        call.readers.push_back({i, k});
      }
    }
  }
  std::set<std::string> claimed;
  for (auto &[b, call] : merged) {
    const onnx::NodeProto &producer = g.node(call.producer);
    std::vector<std::string> params;
    std::set<std::string> leaves;
    for (const auto &arg : fxArgs(fx.nodeFx[call.producer]))
      if (auto t = sig.find(arg); t != sig.end()) {
        params.push_back(t->second);
        leaves.insert(t->second.substr(t->second.rfind('.') + 1));
      }
    std::string owner = commonOwner(params);
    std::string module =
        owner.empty() ? "" : mergedCallModule(fx, call, leaves, owner, claimed);
    auto [reader, readerInput] = call.readers.front();
    std::string what = mergedCallText(
        g.node(reader), g.node(reader).input(readerInput), b, fx.vanished);
    if (module.empty())
      return refuse(path, what);
    for (const std::string &l : leaves)
      claimed.insert(module + "." + l);
    // No other parameter gone where the two calls ran (a chain of merged
    // calls would leave one).
    std::string around = commonAncestor(owner, module);
    for (const std::string &v : fx.vanished)
      if (!claimed.count(v) &&
          (around.empty() || v.rfind(around + ".", 0) == 0))
        return refuse(path, what);
    // The copy of P, reading copies of its parameter initializers.
    int copyIndex = g.node_size();
    onnx::NodeProto copy = producer;
    copy.GetReflection()->MutableUnknownFields(&copy)->Clear(); // metadata
    std::string base = producer.name(), suffix = "#" + b;
    copy.set_name(base + suffix);
    for (int o = 0; o < copy.output_size(); ++o)
      if (!copy.output(o).empty())
        copy.set_output(o, copy.output(o) + suffix);
    std::vector<ParamOrigin> made;
    for (int k = 0; k < copy.input_size(); ++k) {
      const std::string &in = copy.input(k);
      if (!fx.initNames.count(in))
        continue;
      std::string target =
          module + "." + llvm::StringRef(in).rsplit('.').second.str();
      if (!claimed.count(target) || fx.initNames.count(target))
        return refuse(path, what);
      onnx::TensorProto *t = g.add_initializer();
      *t = *llvm::find_if(g.initializer(), [&](const onnx::TensorProto &x) {
        return x.name() == in;
      });
      t->set_name(target);
      ParamOrigin o{target, in, "merged-exact", false, {{copyIndex, k}}};
      o.why = "the parameter of " + b +
              ", a call the exporter's optimiser "
              "merged into " +
              fxDefined(fx.nodeFx[call.producer]);
      made.push_back(std::move(o));
      copy.set_input(k, target);
    }
    ParamOrigin cloned{
        base + suffix, base, "cloned", false, {{call.producer, copyIndex}}};
    cloned.why = "computes " + b + " of " + module +
                 ", which the exporter's optimiser merged into it";
    for (auto [n, k] : call.readers) {
      g.mutable_node(n)->set_input(k, g.node(n).input(k) + suffix);
      cloned.uses.push_back({n, k});
    }
    // --save-onnx replays the copy reading P's initializers, then the
    // merged-exact origins that follow give it its own.
    *g.add_node() = std::move(copy);
    origins.push_back(std::move(cloned));
    for (ParamOrigin &o : made)
      origins.push_back(std::move(o));
  }
  return llvm::Error::success();
}

/// Initializer i holds rows of an embedding, some repeated: name#rows
/// [distinct x last] and name#index [leading dims] make `name` again with a
/// Gather; name#rows is trained.
void gatherDistinctRows(onnx::GraphProto &g, int i, mlir::RankedTensorType type,
                        const std::string &bytes, const Rows &rows,
                        int64_t last, const std::string &note,
                        const std::string &sums, const std::string &advice,
                        std::vector<ParamOrigin> &origins,
                        std::vector<std::string> &warnings) {
  const onnx::TensorProto &t = g.initializer(i);
  std::string name = t.name(), rowsName = name + "#rows",
              indexName = name + "#index";
  onnx::TensorProto distinct = t;
  distinct.set_name(rowsName);
  distinct.clear_dims();
  distinct.add_dims(static_cast<int64_t>(rows.firstOf.size()));
  distinct.add_dims(last);
  std::string data;
  for (int64_t f : rows.firstOf)
    data.append(bytes.data() + f * rows.rowBytes, rows.rowBytes);
  distinct.clear_float_data();
  distinct.clear_double_data();
  distinct.clear_int32_data();
  distinct.clear_data_location();
  distinct.clear_external_data();
  distinct.set_raw_data(data);
  onnx::TensorProto index;
  index.set_name(indexName);
  index.set_data_type(onnx::TensorProto::INT64);
  for (int d = 0; d + 1 < type.getRank(); ++d)
    index.add_dims(type.getShape()[d]);
  index.set_raw_data(std::string(
      reinterpret_cast<const char *>(rows.index.data()),
      rows.index.size() * sizeof(int64_t)));
  *g.mutable_initializer(i) = std::move(distinct);
  *g.add_initializer() = std::move(index);
  onnx::NodeProto *gather = g.add_node();
  gather->set_op_type("Gather");
  gather->set_name("smp.folded." + name);
  gather->add_input(rowsName);
  gather->add_input(indexName);
  gather->add_output(name);
  auto *ins = g.mutable_input();
  for (int k = 0; k < ins->size(); ++k)
    if (ins->Get(k).name() == name) {
      ins->DeleteSubrange(k, 1);
      break;
    }
  ParamOrigin o{rowsName, name, "folded-rows", false, {}, data};
  for (int64_t r : rows.index)
    o.uses.push_back({static_cast<int>(r), 0});
  origins.push_back(std::move(o));
  warnings.push_back(note + "its " + std::to_string(rows.rows) + " rows hold " +
                     std::to_string(rows.firstOf.size()) +
                     " distinct ones, which smp trains as " + rowsName + " (" +
                     sums + ", as PyTorch's); --save-onnx writes '" + name +
                     "' back from them" + advice);
}

/// The fold `t` of op `op` holds each element of `param` once
/// (attributeMoves): trained as it is; a matrix transposed (`self.weight.T`)
/// is exported by checkpoints as PyTorch's.
void trainMoved(const onnx::TensorProto &t, llvm::StringRef op,
                const std::string &param, FxGraph &fx,
                std::vector<ParamOrigin> &origins) {
  origins.push_back({t.name(), t.name(), "folded", false, {}});
  bool transposed = op == "t" || op == "transpose" || op == "permute";
  if (transposed && t.dims_size() == 2)
    origins.push_back({t.name(), param, "renamed", true, {}});
  fx.trainedMoves.push_back("'" + t.name() + "' (" + param + ", aten." +
                            op.str() + ")");
}

/// 2. Initializer i, if a float initializer that holds a folded FX value
/// (its name is an argument of a surviving node and no parameter's).
llvm::Error resolveFoldedInitializer(onnx::GraphProto &g, int i,
                                     llvm::StringRef path, FxGraph &fx,
                                     std::vector<ParamOrigin> &origins,
                                     std::vector<std::string> &warnings,
                                     std::set<std::string> &frozen,
                                     mlir::MLIRContext *ctx,
                                     llvm::StringRef modelDir) {
  const onnx::TensorProto &t = g.initializer(i);
  if (fx.sigTargets.count(t.name()) || !fx.foldedReaders.count(t.name()))
    return llvm::Error::success();
  auto type = checkTensor(ctx, t, modelDir.str());
  if (!type) {
    llvm::consumeError(type.takeError());
    return llvm::Error::success();
  }
  if (!mlir::isa<mlir::FloatType>(type->getElementType()))
    return llvm::Error::success();
  auto bytes = readTensorBytes(t, *type, modelDir.str());
  if (!bytes)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " +
                                       llvm::toString(bytes.takeError()));
  int64_t es = elementSize(t.data_type());
  llvm::StringRef op = fxOp(t.name());
  bool copies = op == "expand" || op == "repeat";
  bool constant = constantRow(*bytes, es),
       infinite = holdsMaskValue(*bytes, es);
  // A parameter only moved (attributeMoves): the fold holds each of its
  // elements once, so training the fold with an elementwise optimizer is
  // training the parameter.
  auto moved = fx.moved.find(t.name());
  if (moved != fx.moved.end() && !constant && !infinite) {
    trainMoved(t, op, moved->second, fx, origins);
    return llvm::Error::success();
  }
  // A constant-valued fold, while parameters are gone, read in the module
  // of such a parameter (Gemma's norm `x * (1 + w)` of a zero-init w,
  // folded to ones: every norm's into one) or made by an op that only
  // moves or copies elements (a class token of zeros expanded; `x @
  // self.w.t()` of a zero-init w) looks exactly like a folded buffer.
  // Freezing it would train another model if it was the parameter. (A
  // mask's fold ends in arithmetic, in an attention module: where, mul,
  // masked_fill.)
  std::string owner =
      moved != fx.moved.end() ? moved->second : fx.ownerOfReaders(t.name());
  if (constant && !infinite &&
      (!owner.empty() || (!fx.vanished.empty() && onlyMoves(op))))
    return refuse(
        path, "initializer '" + t.name() +
                  "' holds one value everywhere, folded by the "
                  "exporter's optimiser from an aten." +
                  op.str() +
                  (owner.empty()
                       ? ", and PyTorch parameter(s) " +
                             joinNames(fx.vanished) + " are gone from the file"
                       : " read in the module of PyTorch parameter " + owner +
                             ", which is gone from the file") +
                  ": it may be such a parameter (initialised to a "
                  "constant) or a buffer, which smp cannot tell "
                  "apart");
  if (constant || infinite) // a buffer: frozen by the shared-initializer rules
    return llvm::Error::success();
  if (fx.vanished.empty()) {
    // Folded from buffers only (rotary cos/sin tables): not trained.
    frozen.insert(t.name());
    return llvm::Error::success();
  }
  // A parameter's arithmetic (Gemma's `1 + w`: AdamW's weight decay would
  // shrink 1 + w, not w) cannot be trained as the parameter.
  if ((op != "embedding" && !copies) || type->getRank() < 2)
    return refuse(path, "initializer '" + t.name() +
                            "' holds a value the exporter's optimiser "
                            "folded (an aten." +
                            op.str() +
                            " of constants), and PyTorch parameter(s) " +
                            joinNames(fx.vanished) +
                            " are gone from the file: smp cannot tell "
                            "which parameter it holds or how to train it");
  // An embedding's rows gathered at constant positions, or a parameter
  // broadcast (aten.expand: ViT's class token over a fixed batch) or tiled
  // (aten.repeat): each element a copy of a parameter element, whose
  // gradient PyTorch sums over its copies, as the distinct rows' Gather does.
  if (op != "embedding" && !copies)
    return refuse(path, "initializer '" + t.name() +
                            "' holds a value the exporter's optimiser "
                            "folded (an aten." + op.str() +
                            " of constants), and PyTorch parameter(s) " +
                            joinNames(fx.vanished) +
                            " are gone from the file: smp cannot tell "
                            "which parameter it holds or how to train it");
  // Rows of an embedding weight gathered at constant indices. PyTorch
  // sums the gradients of every position that gathered one row: train
  // the distinct rows, gathered back into the folded shape.
  int64_t last = type->getShape().back();
  Rows rows = distinctRows(*bytes, last * es);
  for (int64_t f : rows.firstOf) {
    llvm::StringRef row(bytes->data() + f * rows.rowBytes, rows.rowBytes);
    if (constantRow(row, es))
      return refuse(path, "the folded " +
                              std::string(copies ? "aten." + op.str() + " '"
                                                 : "embedding '") +
                              t.name() +
                              "' holds a constant row (a padding row, "
                              "which PyTorch does not train, a broadcast "
                              "along the last dim, or equal rows that smp "
                              "cannot tell apart)");
    if (copies && periodicRow(row, es))
      return refuse(path, "the folded aten." + op.str() + " '" + t.name() +
                              "' repeats its rows along the last dim: smp "
                              "cannot tell the parameter's elements from "
                              "their copies");
  }
  std::string note =
      "initializer '" + t.name() +
      (copies ? "' holds copies of a parameter that the exporter's "
                "optimiser " +
                    std::string(op == "expand" ? "expanded" : "repeated") +
                    " and folded"
              : "' holds rows of an embedding that the exporter's optimiser "
                "gathered at constant positions and folded") +
      " (PyTorch parameter(s) gone from the file: " + joinNames(fx.vanished) +
      "): ";
  // An embedding fold holds only the rows gathered; a copy, all of them.
  std::string advice = copies ? ""
                              : "; re-export with torch.onnx.export(..., "
                                "optimize=False) to train the whole "
                                "parameter";
  if ((int64_t)rows.firstOf.size() == rows.rows) {
    origins.push_back({t.name(), t.name(), "folded", false, {}});
    warnings.push_back(note + "smp trains its " + std::to_string(rows.rows) +
                       " rows as those parameter rows; --save-onnx writes "
                       "the folded rows back" +
                       advice);
    return llvm::Error::success();
  }
  gatherDistinctRows(g, i, *type, *bytes, rows, last, note,
                     copies ? "the parameter's rows, each one's gradient "
                              "summed over its copies"
                            : "one parameter row per distinct row, its "
                              "gradient summed over the positions that read "
                              "it",
                     advice, origins, warnings);
  return llvm::Error::success();
}

} // namespace

std::vector<std::string> nodeScopes(const onnx::NodeProto &n) {
  std::string meta = nodeMetadata(n, "pkg.torch.onnx.name_scopes");
  llvm::StringRef text = llvm::StringRef(meta).trim();
  std::vector<std::string> out;
  if (!text.consume_front("[") || !text.consume_back("]"))
    return out;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  for (llvm::StringRef p : parts)
    out.push_back(p.trim().trim('\'').str());
  if (!out.empty())
    out.pop_back();
  return out;
}

llvm::Error resolveFoldedParameters(
    onnx::GraphProto &g, llvm::StringRef path,
    const std::map<std::string, std::string> &sig,
    std::vector<ParamOrigin> &origins, std::vector<std::string> &warnings,
    std::set<std::string> &frozen, mlir::MLIRContext *ctx,
    llvm::StringRef modelDir) {
  if (sig.empty())
    return llvm::Error::success();
  if (llvm::Error err = unmergeCalls(g, path, sig, origins))
    return err;
  FxGraph fx(g, sig);
  // A tied parameter's other name, for checkpoints (torch.export keeps
  // one; PyTorch's state_dict has both).
  for (const auto &[alias, read] : fx.aliases)
    origins.push_back({read, alias, "alias", false, {}});
  fx.attributeMoves();
  for (int i = 0; i < g.initializer_size(); ++i)
    if (llvm::Error err = resolveFoldedInitializer(
            g, i, path, fx, origins, warnings, frozen, ctx, modelDir))
      return err;
  if (!fx.trainedMoves.empty())
    warnings.push_back(
        "the exporter's optimiser folded PyTorch parameters moved by a "
        "transpose, permute or view into initializers named after the move: " +
        joinNames(fx.trainedMoves) +
        ": smp trains each in that layout (every element once, as PyTorch "
        "trains the parameter); --save-onnx writes them back; checkpoints "
        "name a transposed matrix as PyTorch does, the others as the file "
        "does");
  return llvm::Error::success();
}

} // namespace smp::onnx_frontend
