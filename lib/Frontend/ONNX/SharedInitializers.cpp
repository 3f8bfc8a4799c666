//===- SharedInitializers.cpp - Parameters as the framework had them ------===//

#include "SharedInitializers.h"

#include "FxGraph.h"

#include "TensorData.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/xxhash.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// A float initializer that the importer makes a parameter.
struct Init {
  int index = 0; // in graph.initializer()
  std::string name;
  std::vector<int64_t> dims;
  std::string bytes;
  int64_t elementSize = 0;
  bool constant = false; // every element equal (a fresh ones/zeros tensor)
  bool infinite = false; // holds -inf or finfo.min: a mask, not a parameter
  bool sinusoid = false; // a sinusoidal position table (holdsSinusoidTable)
  bool buffer = false;   // frozen (markBuffers): not a parameter
  bool scalar = false;   // one element (scalarParameter)
};

/// The owner (splitMergedConstant) of the readers whose call passes None
/// where they read a merged initializer: not a parameter name.
const char *const kExporterConstant = "\x01none";

bool isDefaultDomain(const std::string &d) { return d.empty() || d == "ai.onnx"; }

std::string describeValue(const Init &t) {
  if (t.elementSize == 4) {
    float v;
    std::memcpy(&v, t.bytes.data(), 4);
    char buf[32];
    snprintf(buf, sizeof(buf), "all %g", v);
    return buf;
  }
  return "constant";
}

std::string nodeName(const onnx::GraphProto &g, int i) {
  const auto &n = g.node(i);
  return n.name().empty() ? n.op_type() + " #" + std::to_string(i) : n.name();
}

std::string metadata(const onnx::NodeProto &n, llvm::StringRef key) {
  return nodeMetadata(n, key);
}

/// The steps of resolveSharedInitializers on one graph, with what they share:
/// the float initializers that become parameters and the origins found.
struct SharedInitializers {
  onnx::GraphProto &g;
  llvm::StringRef path;
  const std::map<std::string, std::string> &signature;
  std::vector<ParamOrigin> &origins;
  std::vector<std::string> &warnings;
  const ImportOptions &options;
  llvm::StringSet<> tie, untie;
  llvm::StringSet<> tieUsed, untieUsed; // the names that changed a decision
  // The float initializers that become parameters, with their bytes.
  std::vector<Init> inits;
  llvm::StringMap<size_t> byName;
  llvm::StringSet<> allInits;
  std::set<std::string> slopes;     // PRelu slopes (preluSlopes)
  std::set<std::string> sigTargets; // the graph signature's parameters
  std::set<std::string> sigBuffers; // its buffers and tensor constants

  /// Reads the float initializers that become parameters into `inits`.
  llvm::Error readInits(MLIRContext *ctx, const std::string &modelDir) {
    for (const auto &[var, target] : signature)
      sigTargets.insert(target);
    for (const auto &[var, target] :
         signatureInputs(g, {"BUFFER", "CONSTANT_TENSOR"}))
      if (!sigTargets.count(target))
        sigBuffers.insert(target);
    slopes = preluSlopes(g);
    const std::set<std::string> settings = settingInitializers(g);
    for (int i = 0; i < g.initializer_size(); ++i) {
      const auto &t = g.initializer(i);
      allInits.insert(t.name());
      if (settings.count(t.name()))
        continue; // a Resize's scales: a constant
      auto type = checkTensor(ctx, t, modelDir);
      if (!type)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       path + ": " +
                                           llvm::toString(type.takeError()));
      bool scalar = type->getNumElements() == 1;
      if (!isa<FloatType>(type->getElementType()) ||
          type->getNumElements() < 1 ||
          (scalar && !(options.training &&
                       (slopes.count(t.name()) ||
                        scalarParameter(t.name(), options.exportedStateKeys,
                                        sigTargets)))))
        continue;
      auto bytes = readTensorBytes(t, *type, modelDir);
      if (!bytes)
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       path + ": " +
                                           llvm::toString(bytes.takeError()));
      Init in;
      in.index = i;
      in.name = t.name();
      in.dims.assign(type->getShape().begin(), type->getShape().end());
      in.elementSize = elementSize(t.data_type());
      in.bytes = std::move(*bytes);
      in.constant = true;
      for (size_t k = in.elementSize; k < in.bytes.size(); k += in.elementSize)
        if (std::memcmp(&in.bytes[k], in.bytes.data(), in.elementSize) != 0) {
          in.constant = false;
          break;
        }
      in.infinite = holdsMaskValue(in.bytes, in.elementSize);
      // smp.export's sidecar lists what PyTorch does not train: no guess.
      in.sinusoid = options.training && !options.exportedStateKeys &&
                    holdsSinusoidTable(in.dims, in.bytes, in.elementSize);
      in.scalar = scalar;
      byName[in.name] = inits.size();
      inits.push_back(std::move(in));
    }
    return llvm::Error::success();
  }

  /// 0. Float initializers holding infinities are buffers (attention masks),
  /// never parameters: they get no gradient. So are those the dynamo
  /// graph signature lists as buffers or tensor constants (Swin-v2's
  /// relative_coords_table, which gradients reach), constant-valued ones
  /// that the dynamo exporter's graph signature does not list as a
  /// parameter (a folded all-zero attention mask), values folded from
  /// buffers (`frozenFolds`), and those frozenByUse finds (no gradient
  /// reaches them; the dynamo optimiser folded them from constants). The
  /// parameters the earlier steps made (`made`: restored biases, folded
  /// embedding rows) stay parameters.
  void markBuffers(const std::set<std::string> &frozenFolds,
                   const std::set<std::string> &made) {
    std::vector<std::string> candidates;
    for (const Init &in : inits)
      if (!in.infinite && !made.count(in.name))
        candidates.push_back(in.name);
    std::map<std::string, std::string> byUse =
        frozenByUse(g, candidates, sigTargets);
    // A constant value a parameter's call reads, while a parameter is gone
    // from the file, may be that parameter folded (the transpose of a
    // zero-initialised Linear weight: LoRA's B, a zero-init projection):
    // not frozen, it is trained as any such fold is.
    bool vanished = llvm::any_of(
        sigTargets, [&](const std::string &t) { return !allInits.count(t); });
    std::set<std::string> paramRead = vanished
                                          ? readByParameterCalls(g, candidates)
                                          : std::set<std::string>{};
    for (Init &in : inits) {
      std::string why;
      if (in.infinite)
        why = "it holds infinities or the lowest float (torch.finfo.min): "
              "an attention mask";
      else if (sigBuffers.count(in.name) && !made.count(in.name))
        why = "the exporter's graph signature lists it as a buffer "
              "(register_buffer, a tensor constant): PyTorch never trains "
              "it";
      else if (in.constant && !sigTargets.empty() &&
               !sigTargets.count(in.name) && !made.count(in.name) &&
               !paramRead.count(in.name))
        why = "it is constant and not a parameter of the exporter's "
              "signature: an attention mask, the ones and zeros a norm "
              "without weight or bias is given";
      else if (frozenFolds.count(in.name))
        why = "the exporter's optimiser folded it from buffers and "
              "constants, no parameter: rotary tables, timestep "
              "frequencies";
      else if (auto it = byUse.find(in.name); it != byUse.end())
        why = it->second;
      else if (in.sinusoid && !made.count(in.name) &&
               !llvm::is_contained(options.trainable, in.name)) {
        why = "it holds a sinusoidal position table, which PyTorch models "
              "keep with requires_grad=False";
        warnings.push_back(
            "initializer '" + in.name +
            "' holds a sinusoidal position table (sin and cos of the "
            "position times a frequency per column), which PyTorch models "
            "keep frozen (requires_grad=False: Marian, Pegasus, Whisper, "
            "XLM) and the file cannot say: smp freezes it; pass --trainable " +
            in.name + " to train it");
      }
      if (why.empty())
        continue;
      in.buffer = true; // kept out of the rules below
      ParamOrigin o{in.name, in.name, "buffer", false, {}};
      o.why = why;
      origins.push_back(std::move(o));
    }
  }

  /// A frozen copy of `in` for the readers that read the exporter's own
  /// constant in its place (readsExporterConstant), named after the first
  /// one's FX value and the initializer's leaf ("layer_norm_3#weight",
  /// "group_norm#val_42": no module path, as no state_dict holds it).
  /// `merged`: parameters read `in` too.
  std::string exporterConstantCopy(const Init &in, int reader, bool merged) {
    const std::string call = metadata(g.node(reader), "pkg.torch.onnx.fx_node");
    std::string fx = fxDefined(call);
    llvm::StringRef leaf = llvm::StringRef(in.name).rsplit('.').second;
    std::string want = (fx.empty() ? nodeName(g, reader) : fx) + "#" +
                       (leaf.empty() ? llvm::StringRef(in.name) : leaf).str();
    std::string copy = want;
    for (int k = 1; allInits.count(copy); ++k)
      copy = want + std::to_string(k);
    copyInitializer(in, copy);
    ParamOrigin o{copy, in.name, "buffer", false, {}};
    o.why = groupNormInstanceNorm(g.node(reader))
                ? "the exporter's ones or zeros that its translation of " + fx +
                      " normalises each group with (the call's weight and "
                      "bias apply after)"
                : "the exporter's constant for an argument its call passes "
                  "as None (" +
                      fx + ": a norm without weight or bias)";
    if (merged)
      o.why += ", which its optimiser merged with the equal '" + in.name + "'";
    origins.push_back(std::move(o));
    return copy;
  }

  void copyInitializer(const Init &from, const std::string &name) {
    onnx::TensorProto *copy = g.add_initializer();
    *copy = g.initializer(from.index);
    copy->set_name(name);
    allInits.insert(name);
  }

  /// 1. `b = Identity(a)` of a parameter: the exporter merged b into a.
  /// (Node indices stay those of the file until step 2 is done: the artifact
  /// records them for --save-onnx.) Returns the Identity nodes to drop. An
  /// Identity whose metadata names its aten call is the dynamo exporter's
  /// translation of one (`w.detach()`, `w.clone()`), no such marker: b is
  /// w, detached or not (DetachedValues.cpp), not a parameter of its own.
  std::set<int> splitIdentities() {
    std::set<int> dropNodes;
    for (int i = 0; i < g.node_size(); ++i) {
      const auto &n = g.node(i);
      if (n.op_type() != "Identity" || !isDefaultDomain(n.domain()) ||
          n.input_size() != 1 || n.output_size() != 1 ||
          !nodeMetadata(n, "pkg.torch.onnx.fx_node").empty())
        continue;
      auto it = byName.find(n.input(0));
      const std::string &out = n.output(0);
      if (it == byName.end() || out.empty() || allInits.count(out))
        continue;
      if (tie.count(out) || tie.count(n.input(0))) {
        for (const std::string &named : {out, n.input(0)})
          if (tie.count(named))
            tieUsed.insert(named);
        continue;
      }
      if (signature.empty() && repeatedCallCopy(g, n))
        continue; // one tensor, read through the marker (ALBERT's block)
      copyInitializer(inits[it->second], out);
      ParamOrigin o{out, n.input(0), "identity", false, {}};
      if (inits[it->second].buffer) { // a copy of a buffer is one too
        o.kind = "buffer";
        o.why = "a copy of buffer '" + n.input(0) +
                "' that the exporter wrote as an Identity";
      }
      origins.push_back(std::move(o));
      dropNodes.insert(i);
    }
    return dropNodes;
  }

  /// 2. One constant-valued initializer read by several nodes: the dynamo
  /// exporter merged equal fresh tensors (norm weights, zero biases). Where
  /// its metadata names the PyTorch parameter each node read, the nodes are
  /// grouped by it (exact: an ALBERT-style shared norm stays one parameter);
  /// where an smp.export sidecar names the initializer, it is one tensor;
  /// otherwise each node gets its own parameter and a warning says how to
  /// keep them shared.
  void splitMergedConstants(const std::set<int> &dropNodes) {
    std::map<std::string, std::vector<std::pair<int, int>>> readers;
    for (int i = 0; i < g.node_size(); ++i)
      for (int k = 0; k < g.node(i).input_size(); ++k)
        if (!dropNodes.count(i) && byName.count(g.node(i).input(k)))
          readers[g.node(i).input(k)].push_back({i, k});
    llvm::StringSet<> graphOutputs;
    for (const auto &o : g.output())
      graphOutputs.insert(o.name());
    for (auto &[name, uses] : readers)
      splitMergedConstant(name, uses, graphOutputs);
  }

  /// Step 2 for initializer `name`, read at `uses` (node, input).
  void splitMergedConstant(const std::string &name,
                           const std::vector<std::pair<int, int>> &uses,
                           const llvm::StringSet<> &graphOutputs) {
    const Init &in = inits[byName[name]];
    llvm::SmallVector<int> nodes;
    std::set<int> constantReaders; // readsExporterConstant
    for (auto [node, k] : uses) {
      if (nodes.empty() || nodes.back() != node)
        nodes.push_back(node);
      if (!signature.empty() && readsExporterConstant(g.node(node), k))
        constantReaders.insert(node);
    }
    const bool constantRead = !constantReaders.empty();
    if ((nodes.size() < 2 && !constantRead) || in.buffer ||
        graphOutputs.count(name))
      return;
    // smp.export's sidecar names each initializer's state_dict tensor (a
    // merged copy is an Identity marker): one read by several nodes is one
    // tensor (ALBERT's shared layer had been untied, silently).
    if (options.exportedStateKeys && options.exportedStateKeys->count(name) &&
        !constantRead)
      return;
    // A TorchScript file writes a merged copy as an Identity marker too:
    // readers all in the owner's module are calls of that one module.
    if (signature.empty() && llvm::all_of(nodes, [&](int n) {
          return readByItsModule(g.node(n), name);
        }))
      return;
    // The PyTorch parameter behind each reading node, if the metadata says;
    // for a fold no parameter is named after (`val_0`: the transpose of a
    // Linear's weight), the parameters of the node's call; kExporterConstant
    // where the call passes None there (the exporter's ones or zeros).
    bool exact = !signature.empty();
    bool fold = exact && llvm::none_of(signature, [&](const auto &entry) {
                  return entry.second == name;
                });
    llvm::SmallVector<std::string> owner;
    for (int node : nodes) {
      const onnx::NodeProto &n = g.node(node);
      bool meta = !metadata(n, "pkg.torch.onnx.fx_node").empty();
      if (constantReaders.count(node)) {
        owner.push_back(kExporterConstant);
        continue;
      }
      owner.push_back(!exact ? std::string()
                      : fold ? torchCallParameters(n, signature)
                      : meta ? torchParameterRead(n, name, signature)
                             : consumersParameter(g, node, name, signature));
      exact &= !owner.back().empty();
    }
    // Calls that share some parameters but not all: the fold may be the
    // shared one.
    if (fold && exact && !disjointCalls(owner))
      exact = false;
    // Equal random tensors are one shared parameter unless the metadata
    // names several (copy.deepcopy'd layers: nn.TransformerEncoder's, whose
    // equal weights the dynamo optimiser merged). A scalar is one value
    // whatever it holds: a guess that several nodes read equal fresh scalars
    // would untie every shared learnable scale.
    if ((!in.constant || in.scalar) && !exact)
      return;
    if (!exact)
      for (size_t u = 0; u < nodes.size(); ++u)
        if (owner[u] != kExporterConstant)
          owner[u] = std::to_string(u); // one parameter per node
    if (std::set<std::string>(owner.begin(), owner.end()).size() < 2 &&
        !constantRead)
      return; // one parameter: nothing to untie
    if (tie.count(name) && !constantRead) {
      tieUsed.insert(name);
      return;
    }
    // The group of the parameter named like the initializer (else the first
    // group of a parameter) keeps it; every other group gets a copy, named
    // after its PyTorch parameter where known. The exporter's constants get
    // one frozen copy.
    std::map<std::string, std::string> groupName;
    auto keep = llvm::find(owner, name);
    if (keep == owner.end())
      keep = llvm::find_if(
          owner, [](const std::string &o) { return o != kExporterConstant; });
    if (keep != owner.end())
      groupName[*keep] = name;
    std::string list;
    int copyIndex = 0;
    for (size_t u = 0; u < nodes.size(); ++u) {
      list += (u ? ", " : "") + nodeName(g, nodes[u]);
      auto [it, fresh] = groupName.insert({owner[u], ""});
      if (fresh && owner[u] == kExporterConstant) {
        it->second = exporterConstantCopy(in, nodes[u], keep != owner.end());
      } else if (fresh) {
        std::string want = exact && !fold ? owner[u] : name;
        std::string copy = want;
        while (copy.empty() || allInits.count(copy))
          copy = want + "#" + std::to_string(++copyIndex);
        copyInitializer(in, copy);
        it->second = copy;
        ParamOrigin o{copy, name, exact ? "merged-exact" : "merged", false, {}};
        if (fold && exact)
          o.why = "the fold of a parameter of the call reading " + owner[u];
        origins.push_back(std::move(o));
      }
      if (it->second == name)
        continue;
      // The copy's own origin ("merged", "merged-exact", or the frozen
      // "buffer" of the exporter's constant), not a checkpoint name that
      // may carry the same name (an "alias" of a tied parameter).
      ParamOrigin &o = *llvm::find_if(origins, [&](const ParamOrigin &p) {
        return p.name == it->second && p.kind != "alias" && p.kind != "renamed";
      });
      for (auto [node, k] : uses)
        if (node == nodes[u]) {
          g.mutable_node(node)->set_input(k, it->second);
          o.uses.push_back({node, k});
        }
    }
    if (!exact)
      warnings.push_back(
          "initializer '" + name + "' (" + describeValue(in) + ") is read by " +
          std::to_string(nodes.size()) + " nodes (" + list +
          "): exporters merge equal fresh tensors, so smp trains one "
          "parameter per node ('" + name + "', '" + name +
          "#1', ...); pass --tie " + name +
          " if they are one shared parameter");
  }

  /// 3. Copies of one weight (equal, or its transpose: a tied weight that
  /// constant folding stored again) are read as that weight. Returns which
  /// initializers were replaced by a tie.
  std::vector<bool> tieCopies() {
    std::multimap<uint64_t, size_t> byHash;
    for (size_t k = 0; k < inits.size(); ++k)
      if (!inits[k].constant)
        byHash.insert({llvm::xxh3_64bits(llvm::StringRef(inits[k].bytes)), k});
    // Prefer a module's name (not one the exporter made up) as the source.
    std::vector<size_t> order(inits.size());
    for (size_t k = 0; k < order.size(); ++k)
      order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return !generatedName(inits[a].name) && generatedName(inits[b].name);
    });
    // Parameters untied above from equal tensors (merged calls' copies)
    // are separate by the metadata: never a tied copy.
    llvm::StringSet<> untiedNames;
    for (const ParamOrigin &o : origins)
      if (o.kind == "merged-exact")
        untiedNames.insert(o.name);
    std::vector<bool> replaced(inits.size(), false);
    for (size_t k = 0; k < inits.size(); ++k)
      replaced[k] = untiedNames.contains(inits[k].name);
    std::vector<bool> untied = replaced;
    for (size_t a : order) {
      const Init &src = inits[a];
      if (src.constant || src.buffer || replaced[a])
        continue;
      tieCopy(a, src.bytes, false, byHash, replaced);
      if (src.dims.size() == 2)
        tieCopy(a,
                transposeMatrix(src.bytes, src.dims[0], src.dims[1],
                                src.elementSize),
                true, byHash, replaced);
    }
    for (size_t k = 0; k < inits.size(); ++k)
      replaced[k] = replaced[k] && !untied[k];
    return replaced;
  }

  /// Ties every initializer that holds `bytes` (inits[a]'s, or their
  /// transpose) to inits[a]: an Identity or Transpose node makes it.
  void tieCopy(size_t a, const std::string &bytes, bool transposed,
               const std::multimap<uint64_t, size_t> &byHash,
               std::vector<bool> &replaced) {
    const Init &src = inits[a];
    auto range = byHash.equal_range(llvm::xxh3_64bits(llvm::StringRef(bytes)));
    for (auto it = range.first; it != range.second; ++it) {
      size_t b = it->second;
      const Init &dst = inits[b];
      if (b == a || replaced[b] || dst.buffer || dst.bytes != bytes ||
          dst.elementSize != src.elementSize ||
          g.initializer(dst.index).data_type() !=
              g.initializer(src.index).data_type())
        continue;
      std::vector<int64_t> want = src.dims;
      if (transposed)
        std::reverse(want.begin(), want.end());
      if (dst.dims != want)
        continue;
      // Both in torch.export's graph signature: two PyTorch parameters
      // (it lifts a tied tensor once), equal at export (copy.deepcopy'd
      // layers, exported with optimize=False).
      if (sigTargets.count(src.name) && sigTargets.count(dst.name))
        continue;
      if (untie.count(dst.name) || untie.count(src.name)) {
        for (const std::string &named : {dst.name, src.name})
          if (untie.count(named))
            untieUsed.insert(named);
        continue;
      }
      replaced[b] = true;
      origins.push_back({dst.name, src.name, "tied", transposed, {}});
      addCopyNode(g, "smp.tie." + dst.name, src.name, dst.name, transposed);
      warnings.push_back(
          "initializer '" + dst.name + "' holds " +
          (transposed ? "the transpose of" : "a copy of") + " '" + src.name +
          "' (a tied weight that the exporter stored twice): smp trains "
          "them as one parameter; pass --untie " + dst.name +
          " if they are separate");
    }
  }

  /// 3b. A fold whose name an exporter made up holding a weight, or its
  /// transpose, beside other rows (TiedBlocks.cpp): read as Concat of the
  /// weight and a parameter of the other rows, unless --untie names it.
  void splitTiedBlocks(const llvm::StringSet<> &gone) {
    std::vector<MatrixView> views;
    for (const Init &in : inits)
      if (in.dims.size() == 2 && !in.constant && !in.buffer &&
          !gone.contains(in.name))
        views.push_back({in.name, in.dims[0], in.dims[1], in.elementSize,
                         g.initializer(in.index).data_type(), in.bytes});
    auto made = [](const MatrixView &holder, const MatrixView &) {
      return generatedName(holder.name);
    };
    std::vector<TiedBlock> blocks = findTiedBlocks(views, made);
    views.clear(); // they point into inits, which change below
    for (const TiedBlock &b : blocks) {
      if (untie.count(b.holder)) {
        untieUsed.insert(b.holder);
        continue;
      }
      Init &in = inits[byName[b.holder]];
      auto [rest, bytes] = splitTiedBlock(g, b, in.bytes, in.elementSize, false,
                                          "", origins, warnings);
      byName.erase(in.name);
      in.name = rest;
      in.dims[0] = b.holderRows - b.rows;
      in.bytes = std::move(bytes);
      byName[rest] = &in - inits.data();
      allInits.insert(rest);
    }
  }

  /// A --tie or --untie that changed no decision: refused (the flag would
  /// say something that does not happen).
  llvm::Error checkTieFlags() {
    for (const auto &n : options.tie)
      if (!tieUsed.contains(n))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            path + ": --tie " + n + " changes nothing: smp does not untie '" +
                n + "' (no Identity copies it and no readers of it are " +
                "trained apart); smpc summary lists what is shared");
    for (const auto &n : options.untie)
      if (!untieUsed.contains(n) && allInits.count(n))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            path + ": --untie " + n + " changes nothing: smp does not read '" +
                n +
                "' as a copy of another initializer; smpc summary lists "
                "what is shared");
    return llvm::Error::success();
  }

  /// Drops the tied copies' initializers (and their graph-input entries);
  /// returns their names.
  llvm::StringSet<> dropTiedCopies(const std::vector<bool> &replaced) {
    llvm::StringSet<> gone;
    for (size_t k = 0; k < inits.size(); ++k)
      if (replaced[k])
        gone.insert(inits[k].name);
    if (!gone.empty()) {
      auto *list = g.mutable_initializer();
      list->erase(std::remove_if(list->begin(), list->end(),
                                 [&](const onnx::TensorProto &t) {
                                   return gone.count(t.name()) != 0;
                                 }),
                  list->end());
      auto *ins = g.mutable_input();
      ins->erase(std::remove_if(ins->begin(), ins->end(),
                                [&](const onnx::ValueInfoProto &v) {
                                  return gone.count(v.name()) != 0;
                                }),
                 ins->end());
    }
    return gone;
  }
};

} // namespace

namespace {

/// Under training, a dynamo export stripped of its metadata is refused
/// unless --without-export-metadata accepts smp's guesses: without the
/// metadata, parameters the exporter's optimiser folded are not seen (a
/// BART trained that way was 1.9% off PyTorch's gradient norm at step 1,
/// with only the merge warnings), and merges are guessed.
llvm::Error checkExportMetadata(const onnx::ModelProto &model,
                                llvm::StringRef path, bool stripped,
                                const ImportOptions &options,
                                std::vector<std::string> &warnings) {
  if (stripped && !options.withoutExportMetadata)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        path +
            ": written by torch.onnx.export's dynamo exporter (producer "
            "pytorch " +
            model.producer_version() +
            ", nodes named node_<op>_<n>) without the metadata it writes "
            "(the graph signature, pkg.torch.onnx.* on every node): a tool "
            "removed it (onnx's version converter does, which "
            "torch.onnx.export uses for opset_version 26 and above). smp "
            "reads it to give back the parameters the exporter's optimiser "
            "merged, folded or removed; without it smp can only guess and "
            "may train another model. Export with opset_version 25 or lower "
            "and do not convert the file, or pass --without-export-metadata "
            "to train on smp's guesses");
  if (stripped) {
    // A removed bias is not a guess: it is gone.
    if (auto err = refuseStrippedRemovals(model.graph(), path))
      return err;
    warnings.push_back(
        "the file has lost the dynamo exporter's metadata: "
        "--without-export-metadata trains on smp's guesses of what the "
        "exporter merged and tied (each said below), and parameters its "
        "optimiser folded into other values are not seen");
  } else if (options.withoutExportMetadata) {
    warnings.push_back("--without-export-metadata changes nothing: the file "
                       "is not a dynamo export stripped of its metadata");
  }
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::vector<ParamOrigin>>
resolveSharedInitializers(onnx::ModelProto &model, llvm::StringRef path,
                          MLIRContext *ctx, const ImportOptions &options,
                          std::vector<std::string> &warnings,
                          std::set<std::string> &scalarParameters) {
  onnx::GraphProto &g = *model.mutable_graph();
  // The dynamo exporter's graph signature (empty for other files), read once.
  const std::map<std::string, std::string> signature = signatureParams(g);
  std::vector<ParamOrigin> origins;
  const bool stripped = strippedDynamoExport(model, signature);
  if (!options.training && options.parameterWarnings && stripped)
    warnings.push_back(
        "the file has lost the dynamo exporter's metadata: smpc compile "
        "--train refuses it unless --without-export-metadata accepts smp's "
        "guesses (below) of what the exporter merged and tied");
  if (options.training) {
    if (auto err =
            checkExportMetadata(model, path, stripped, options, warnings))
      return std::move(err);
    if (auto err = refuseFoldedBatchNorms(g, path))
      return std::move(err);
    if (auto err = restoreRemovedBiases(g, path, signature, origins))
      return std::move(err);
  }
  std::string modelDir = llvm::sys::path::parent_path(path).str();
  std::set<std::string> frozenFolds;
  if (options.training) {
    if (auto err = resolveFoldedParameters(g, path, signature, origins,
                                           warnings, frozenFolds, ctx,
                                           modelDir))
      return std::move(err);
    if (auto err =
            refuseFoldedParameterImages(g, path, signature, ctx, modelDir))
      return std::move(err);
  }
  SharedInitializers s{g,  path, signature, origins, warnings, options,
                       {}, {},   {},        {},      {}};
  for (const auto &n : options.tie)
    s.tie.insert(n);
  for (const auto &n : options.untie)
    s.untie.insert(n);

  if (auto err = s.readInits(ctx, modelDir))
    return std::move(err);
  for (const auto &n : options.tie)
    if (!s.allInits.count(n))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path + ": --tie " + n + ": the model has no initializer '" + n + "'");

  for (const auto &n : options.trainable) {
    auto it = s.byName.find(n);
    if (!s.allInits.count(n))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path + ": --trainable " + n +
                                         ": the model has no initializer '" +
                                         n + "'");
    if (s.sigBuffers.count(n))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path + ": --trainable " + n +
              ": the exporter's graph signature lists '" + n +
              "' as a buffer (register_buffer), which PyTorch never "
              "trains; make it an nn.Parameter and export again to train "
              "it");
    if ((it == s.byName.end() || !s.inits[it->second].sinusoid) &&
        !torchScriptComputedFold(g, n))
      warnings.push_back("--trainable " + n +
                         " changes nothing: smp does not freeze '" + n +
                         "' for its value (only sinusoidal position tables)");
  }
  // A fold's copy (unmergeFolds: Marian's decoder positions) is frozen or
  // trained as its value says; the other origins so far are parameters.
  std::set<std::string> made;
  for (const ParamOrigin &o : origins)
    if (o.kind != "merged-exact" || s.sigTargets.count(o.from))
      made.insert(o.name);
  s.markBuffers(frozenFolds, made);
  std::set<int> dropNodes = s.splitIdentities();
  llvm::StringSet<> paramInits;
  for (const auto &in : s.inits)
    if (!in.buffer)
      paramInits.insert(in.name);
  splitMergedReaders(g, signature, paramInits, origins);
  s.splitMergedConstants(dropNodes);
  for (auto it = dropNodes.rbegin(); it != dropNodes.rend(); ++it)
    g.mutable_node()->DeleteSubrange(*it, 1);
  llvm::StringSet<> gone = s.dropTiedCopies(s.tieCopies());
  s.splitTiedBlocks(gone);
  for (const auto &n : options.untie) {
    std::string recorded = recordedTieUntied(origins, n);
    if (!recorded.empty())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path + ": " + recorded);
    if (!gone.count(n) && !llvm::any_of(origins, [&](const ParamOrigin &o) {
          return o.name == n;
        }) && !s.allInits.count(n))
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          path + ": --untie " + n + ": the model has no initializer '" + n +
              "'");
  }
  if (auto err = s.checkTieFlags())
    return std::move(err);
  if (!options.exportedStateKeys && signature.empty()) {
    llvm::Regex freeze(options.freeze);
    std::vector<FoldCandidate> trained;
    for (const Init &in : s.inits)
      if (!in.buffer && !llvm::is_contained(options.trainable, in.name) &&
          !(!options.freeze.empty() && freeze.match(in.name)))
        trained.push_back({in.name, &in.bytes, in.elementSize, in.scalar,
                           in.constant, s.slopes.count(in.name) > 0});
    for (std::string &w : unsignedFileWarnings(g, trained))
      warnings.push_back(std::move(w));
  }
  // The one-element parameters, and the copies untied from them.
  for (const Init &in : s.inits)
    if (in.scalar && !in.buffer)
      scalarParameters.insert(in.name);
  for (const ParamOrigin &o : origins)
    if (o.kind != "buffer" && scalarParameters.count(o.from))
      scalarParameters.insert(o.name);
  // The PyTorch names of folded Linear weights, for checkpoints: the
  // trained initializers and the copies untied from them.
  std::set<std::string> trained;
  for (const Init &in : s.inits)
    if (!in.buffer && !gone.count(in.name))
      trained.insert(in.name);
  for (const ParamOrigin &o : origins)
    if ((o.kind == "merged" || o.kind == "merged-exact") &&
        trained.count(o.from))
      trained.insert(o.name);
  nameFoldedWeights(g, signature, trained, origins);
  return origins;
}

} // namespace smp::onnx_frontend
