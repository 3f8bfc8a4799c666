//===- MergedCalls.cpp - Calls the dynamo optimiser merged ---------------===//
//
// Common subexpression elimination in the dynamo exporter's optimiser merges
// two calls that read equal fresh tensors on one input (GPT-NeoX's two
// LayerNorms): one node is left and the second call's parameters are gone
// from the file. unmergeCalls copies the node back where the metadata tells
// which parameters the merged call read, and refuses where it cannot (see
// docs/bring-your-own-model.md).
//
//===----------------------------------------------------------------------===//

#include "FxGraph.h"

#include "llvm/ADT/STLExtras.h"

namespace smp::onnx_frontend {
namespace {

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

/// What a refusal of a merged call says: node `n` reads `v` (made by node
/// `producer`) where PyTorch computes `b`, and the parameters gone. Where
/// none is gone the merged call read the values the call left reads:
/// parameters of its own equal to those, or none (a norm without weight or
/// bias, whose exporter's ones and zeros equal a fresh norm's).
std::string mergedCallText(const FxGraph &fx,
                           const std::map<std::string, std::string> &sig,
                           const onnx::NodeProto &n, const std::string &v,
                           const std::string &b, int producer) {
  std::string text =
      "node '" + n.name() + "' reads '" + v + "' where PyTorch computes '" + b +
      "': the exporter's optimiser merged two " + fxOp(b).str() + " calls ";
  if (!fx.vanished.empty())
    return text +
           "whose parameters were equal when exported, so PyTorch "
           "parameter(s) " +
           joinNames(fx.vanished) + " are gone from the file";
  std::vector<std::string> read;
  for (const auto &a : fxArgs(fx.nodeFx[producer]))
    if (auto t = sig.find(a); t != sig.end())
      read.push_back(t->second);
  return text +
         "of one input that were equal when exported, and the call "
         "left reads PyTorch parameter(s) " +
         joinNames(read) +
         ": smp would train them through both calls, but the merged call "
         "may have read none (a norm without weight or bias, whose "
         "exporter's ones and zeros equal a fresh norm's) or parameters of "
         "its own, which smp cannot tell";
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

/// Whether node `n` is a fusion of several FX calls by the optimiser (opset
/// 23's RMSNormalization of Gemma's `x * rsqrt(mean(x^2) + eps) * (1 + w)`,
/// whose metadata is the last call's, `aten.mul(%mul_47, %add_12)`): its
/// inputs are not that call's arguments, so a value it reads where the
/// metadata names another is no sign of a merge.
bool fusedCall(const onnx::NodeProto &n, llvm::StringRef fx) {
  static const std::pair<llvm::StringRef, llvm::StringRef> kFused[] = {
      {"RMSNormalization", "rms_norm"},
      {"LayerNormalization", "layer_norm"},
      {"Attention", "scaled_dot_product_attention"},
      {"Gelu", "gelu"}};
  llvm::StringRef op = fxOp(fxDefined(fx));
  for (auto [onnxOp, aten] : kFused)
    if (n.op_type() == onnxOp && op != aten)
      return true;
  return false;
}

/// The parameter leaves ({"weight", "bias"}) of each call nearest node n
/// upstream (n itself included) that reads parameters: named in its
/// metadata, or an initializer the signature lists read by a node without.
std::vector<std::set<std::string>>
nearestParameterCalls(FxGraph &fx, const onnx::GraphProto &g,
                      const std::map<std::string, std::string> &sig, int n) {
  auto leaf = [](const std::string &p) { return p.substr(p.rfind('.') + 1); };
  std::vector<std::set<std::string>> calls;
  std::vector<int> work{n};
  std::set<int> seen{n};
  while (!work.empty()) {
    int i = work.back();
    work.pop_back();
    std::set<std::string> leaves;
    for (const auto &a : fxArgs(fx.nodeFx[i]))
      if (auto t = sig.find(a); isParamArg(a) && t != sig.end())
        leaves.insert(leaf(t->second));
    for (const auto &in : g.node(i).input())
      if (fx.nodeFx[i].empty() && fx.sigTargets.count(in))
        leaves.insert(leaf(in));
    if (!leaves.empty()) {
      calls.push_back(std::move(leaves));
      continue;
    }
    for (const auto &in : g.node(i).input()) {
      auto p = fx.producer.find(in);
      if (p != fx.producer.end() && seen.insert(p->second).second)
        work.push_back(p->second);
    }
  }
  return calls;
}

/// 1b. A merged call that reads no parameter (%relu_1 merged into %relu)
/// of a value computed from parameters: the calls before it may have been
/// merged too (a deep-copied Linear + ReLU branch of one input: the Linears
/// merged, then the ReLUs, and no node names the second Linear any more),
/// leaving only their parameters gone from the file. Refused where a
/// module inside the one a reader runs in has lost exactly the parameters
/// (by leaf name) of a call nearest %A upstream, not otherwise explained
/// (`claimed`). Elsewhere the merge is exact: a rotary table expanded
/// twice from buffers, the encoder's output transposed by every decoder
/// layer of nn.Transformer.
llvm::Error refuseMergedChains(FxGraph &fx, const onnx::GraphProto &g,
                               llvm::StringRef path,
                               const std::map<std::string, std::string> &sig,
                               const std::map<std::string, MergedCall> &chains,
                               const std::set<std::string> &claimed) {
  for (const auto &[b, call] : chains) {
    std::map<std::string, std::set<std::string>> goneLeaves; // module -> leaves
    for (auto [reader, input] : call.readers) {
      llvm::StringRef module = fx.moduleOf(reader);
      for (const std::string &v : fx.vanished)
        if (!claimed.count(v) &&
            (module.empty() || v.rfind((module + ".").str(), 0) == 0))
          goneLeaves[ownerModule(v).str()].insert(v.substr(v.rfind('.') + 1));
    }
    if (goneLeaves.empty())
      continue;
    std::vector<std::set<std::string>> calls =
        nearestParameterCalls(fx, g, sig, call.producer);
    std::vector<std::string> gone;
    for (const auto &[module, leaves] : goneLeaves)
      if (llvm::is_contained(calls, leaves))
        for (const std::string &l : leaves)
          gone.push_back(module.empty() ? l : module + "." + l);
    if (gone.empty())
      continue;
    auto [reader, input] = call.readers.front();
    return refuse(
        path, "node '" + g.node(reader).name() + "' reads '" +
                  g.node(reader).input(input) + "' where PyTorch computes '" +
                  b + "': the exporter's optimiser merged two " +
                  fxOp(b).str() +
                  " calls of values computed from parameters, and PyTorch "
                  "parameter(s) " +
                  joinNames(gone) +
                  ", the same as a call before them reads, are gone from "
                  "the file: that call may have been merged too (its "
                  "parameters equal at export: a deep-copied branch), "
                  "which smp cannot tell");
  }
  return llvm::Error::success();
}

/// The parameters of modules that left no trace in the file: no surviving
/// node runs in the module, and each of its parameters, a weight or bias,
/// is read by no node as itself (gone from the file, or read only where a
/// norm without weight or bias reads the exporter's constant in its place:
/// readsExporterConstant). Tied names (fx.aliases) are not counted.
std::vector<std::string>
tracelessAffineParameters(FxGraph &fx, const onnx::GraphProto &g,
                          const std::map<std::string, std::string> &sig) {
  std::set<std::string> read, ran;
  for (int i = 0; i < g.node_size(); ++i) {
    for (const auto &a : fxArgs(fx.nodeFx[i]))
      if (auto t = sig.find(a); t != sig.end())
        read.insert(t->second);
    for (int k = 0; k < g.node(i).input_size(); ++k)
      if (fx.sigTargets.count(g.node(i).input(k)) &&
          !readsExporterConstant(g.node(i), k))
        read.insert(g.node(i).input(k));
    for (const std::string &s : fx.scopesOf(i))
      ran.insert(s);
  }
  std::map<std::string, std::vector<std::string>> byModule;
  std::set<std::string> traced;
  for (const auto &[var, target] : sig) {
    if (fx.aliases.count(target))
      continue;
    std::string module = ownerModule(target).str();
    llvm::StringRef leaf = llvm::StringRef(target).rsplit('.').second;
    if (module.empty() || ran.count(module) || read.count(target) ||
        (leaf != "weight" && leaf != "bias"))
      traced.insert(module);
    else
      byModule[module].push_back(target);
  }
  std::vector<std::string> out;
  for (const auto &[module, params] : byModule)
    if (!traced.count(module))
      out.insert(out.end(), params.begin(), params.end());
  return out;
}

/// 1c. A merged call of a norm that passes None for its weight or bias
/// (nn.GroupNorm(affine=False), nn.InstanceNorm1d): the exporter feeds that
/// call ones and zeros of its own, equal to a fresh affine norm's weight
/// and bias, so the optimiser merges an affine norm's call on the same
/// input into it. The affine module is then left with no node in the file
/// and its parameters read by none (tracelessAffineParameters), and smp
/// would train without them. Refused where such parameters exist: smp
/// cannot tell which call they were. (Two norms without weight and bias of
/// one input merge exactly.)
llvm::Error
refuseMergedBareNorms(FxGraph &fx, const onnx::GraphProto &g,
                      llvm::StringRef path,
                      const std::map<std::string, std::string> &sig,
                      const std::map<std::string, MergedCall> &bare) {
  if (bare.empty())
    return llvm::Error::success();
  std::vector<std::string> traceless = tracelessAffineParameters(fx, g, sig);
  if (traceless.empty())
    return llvm::Error::success();
  const auto &[b, call] = *bare.begin();
  auto [reader, input] = call.readers.front();
  llvm::StringRef module = fx.moduleOf(call.producer);
  return refuse(
      path,
      "node '" + g.node(reader).name() + "' reads '" +
          g.node(reader).input(input) + "' where PyTorch computes '" + b +
          "': the exporter's optimiser merged two " + fxOp(b).str() +
          " calls of one input, and the call left" +
          (module.empty() ? "" : " (module '" + module.str() + "')") +
          " passes no weight or bias (the exporter's ones and zeros stand "
          "in); PyTorch parameter(s) " +
          joinNames(traceless) +
          ", read by no node of the file, may be the other call's (equal to "
          "those ones and zeros when exported: a fresh norm), which smp "
          "cannot tell");
}

/// The input of node `n` (whose call's arguments are `args`) that is a
/// fold of %B's op other than %B and than any argument (the one the node
/// reads where its call passed %B), or -1: none, or several.
int mergedFoldInput(const FxGraph &fx, const onnx::NodeProto &n,
                    const std::vector<std::string> &args,
                    const std::string &b) {
  int found = -1;
  for (int k = 0; k < n.input_size(); ++k) {
    const std::string &v = n.input(k);
    if (v == b || !fx.initNames.count(v) || fx.sigTargets.count(v) ||
        fxOp(v) != fxOp(b) || llvm::is_contained(args, v))
      continue;
    if (found >= 0 && n.input(found) != v)
      return -1;
    found = k;
  }
  return found;
}

/// 1d. A fold merged into another: node N's input is the fold `a` (an
/// initializer named after an FX value of the op of %B) where PyTorch
/// passed %B, which nothing makes. The file's record of `a` (its
/// `folded_from`) names the parameters P it was folded from.
///  - P is empty (`a` folded from buffers and constants: rotary tables), or
///    no parameter is gone from the file: equal constants. Kept; so is a
///    fold of arithmetic or one of one value everywhere, which the fold
///    rules refuse where a parameter may be it.
///  - No other parameter with P's leaf names is gone: %B read P too (the
///    same rows gathered twice, merged exactly; N's gradient reaches P
///    through `a` as PyTorch's does). Kept.
///  - `a` holds a sinusoid table, and one module's parameters of those leaf
///    names are gone nearest N (mergedCallModule: Marian's and Pegasus's
///    decoder `embed_positions.weight`, equal to the encoder's): %B is a
///    copy of `a` named %B, which the fold rules freeze as they freeze `a`
///    (or train apart, both named by --trainable).
///  - Otherwise refused: a copy would train one parameter as two, no copy
///    two as one, and smp cannot tell which.
llvm::Error unmergeFolds(FxGraph &fx, onnx::GraphProto &g, llvm::StringRef path,
                         const std::map<std::string, MergedCall> &folds,
                         llvm::function_ref<FoldValue(llvm::StringRef)> valueOf,
                         std::set<std::string> &claimed,
                         std::vector<ParamOrigin> &origins) {
  for (const auto &[b, call] : folds) {
    auto [reader, input] = call.readers.front();
    const std::string a = g.node(reader).input(input);
    std::vector<std::string> params;
    std::set<std::string> leaves;
    for (const std::string &s : fx.sourcesOf(a))
      if (fx.sigTargets.count(s)) {
        params.push_back(s);
        leaves.insert(s.substr(s.rfind('.') + 1));
      }
    // Folded from buffers and constants alone (rotary tables: DeepSeek's
    // query and key rotations), or nothing gone: equal constants, merged
    // exactly. A fold of arithmetic (Gemma's `1 + w`) is the fold rules'
    // (FoldedParameters.cpp), which refuse it while parameters are gone.
    if ((params.empty() && !fx.sourcesOf(a).empty()) || fx.vanished.empty() ||
        !onlyMoves(fxOp(a)))
      continue;
    // Constant (Swin's zero-initialised bias tables): the fold rules
    // refuse it where a parameter may be it, else freeze it.
    FoldValue value = valueOf(a);
    if (value == FoldValue::Constant)
      continue;
    std::string owner = commonOwner(params);
    bool otherGone = llvm::any_of(fx.vanished, [&](const std::string &v) {
      return !claimed.count(v) && !llvm::is_contained(params, v) &&
             leaves.count(v.substr(v.rfind('.') + 1));
    });
    if (!owner.empty() && !otherGone)
      continue;
    std::string module =
        owner.empty() || value != FoldValue::Sinusoid
            ? ""
            : mergedCallModule(fx, call, leaves, owner, claimed);
    if (module.empty())
      return refuse(path,
                    "node '" + g.node(reader).name() + "' reads '" + a +
                        "' where PyTorch computes '" + b +
                        "': the exporter's optimiser folded two " +
                        fxOp(b).str() + " calls to equal values and kept one" +
                        (params.empty()
                             ? std::string()
                             : " (folded from " + joinNames(params) + ")") +
                        ", and PyTorch parameter(s) " + joinNames(fx.vanished) +
                        " are gone from the file: smp cannot tell which "
                        "parameter PyTorch's '" +
                        b + "' read");
    for (const std::string &l : leaves)
      claimed.insert(module + "." + l);
    onnx::TensorProto *t = g.add_initializer();
    *t = *llvm::find_if(g.initializer(), [&](const onnx::TensorProto &x) {
      return x.name() == a;
    });
    t->set_name(b);
    ParamOrigin o{b, a, "merged-exact", false, {}};
    o.why = "the fold of " + module +
            "'s parameters, which the exporter's optimiser merged into " + a;
    for (auto [n, k] : call.readers) {
      g.mutable_node(n)->set_input(k, b);
      o.uses.push_back({n, k});
    }
    origins.push_back(std::move(o));
  }
  return llvm::Error::success();
}

} // namespace

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
                         llvm::function_ref<FoldValue(llvm::StringRef)> valueOf,
                         std::vector<ParamOrigin> &origins) {
  FxGraph fx(g, sig);
  fx.attributeMoves();                      // a moved parameter is not gone
  std::map<std::string, MergedCall> merged; // %B -> its readers
  std::map<std::string, MergedCall> chains; // the same, reading no parameter
  std::map<std::string, MergedCall> bare;   // the survivor a norm with None
  std::map<std::string, MergedCall> folds;  // %B -> readers of a fold
  for (int i = 0; i < g.node_size(); ++i) {
    if (fusedCall(g.node(i), fx.nodeFx[i]))
      continue;
    std::vector<std::string> args = fxArgs(fx.nodeFx[i]);
    for (const auto &b : args) {
      if (isLiftedArg(b) || fx.defined.count(b) || fx.initNames.count(b) ||
          fx.graphInputs.count(b))
        continue;
      if (int k = mergedFoldInput(fx, g.node(i), args, b); k >= 0) {
        folds[b].readers.push_back({i, k});
        continue;
      }
      for (int k = 0; k < g.node(i).input_size(); ++k) {
        const std::string &v = g.node(i).input(k);
        auto p = fx.producer.find(v);
        if (p == fx.producer.end())
          continue;
        std::string a = fxDefined(fx.nodeFx[p->second]);
        if (a.empty() || a == b || fxOp(a) != fxOp(b))
          continue;
        // smp's copy of the call %B (a "cloned" origin, its outputs
        // suffixed "#B"), in a file --save-onnx wrote: %B itself.
        if (llvm::StringRef(v).ends_with("#" + b))
          continue;
        if (normWithoutAffine(fx.nodeFx[p->second])) {
          bare[b].producer = p->second;
          bare[b].readers.push_back({i, k});
        }
        if (llvm::none_of(fxArgs(fx.nodeFx[p->second]), isParamArg)) {
          // A call of both (scaled_dot_product_attention(%view_31,
          // %view_32, ...)) reads %A as itself.
          if (llvm::is_contained(args, a))
            continue;
          chains[b].producer = p->second;
          chains[b].readers.push_back({i, k});
          continue;
        }
        MergedCall &call = merged[b];
        // The node reads %A too (which input is which?), or %B's readers
        // read different nodes.
        if (llvm::is_contained(args, a) ||
            (call.producer >= 0 && call.producer != p->second))
          return refuse(path,
                        mergedCallText(fx, sig, g.node(i), v, b, p->second));
        call.producer = p->second;
        call.readers.push_back({i, k});
      }
    }
  }
  if (llvm::Error err = refuseMergedBareNorms(fx, g, path, sig, bare))
    return err;
  std::set<std::string> claimed;
  if (llvm::Error err =
          unmergeFolds(fx, g, path, folds, valueOf, claimed, origins))
    return err;
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
    std::string what =
        mergedCallText(fx, sig, g.node(reader),
                       g.node(reader).input(readerInput), b, call.producer);
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
  return refuseMergedChains(fx, g, path, sig, chains, claimed);
}

} // namespace smp::onnx_frontend
