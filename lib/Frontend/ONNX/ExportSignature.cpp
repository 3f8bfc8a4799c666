//===- ExportSignature.cpp - The dynamo export's signature and calls ------===//
//
// What the dynamo exporter writes beside the graph: torch.export's graph
// signature (which inputs are PARAMETERs, BUFFERs, tensor constants) on the
// graph, and each node's FX call (`pkg.torch.onnx.fx_node`), read to tell
// which PyTorch parameter a node reads (SharedInitializers.cpp).
//
//===----------------------------------------------------------------------===//

#include "FxGraph.h"
#include "SharedInitializers.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <google/protobuf/unknown_field_set.h>

#include <set>

namespace smp::onnx_frontend {
namespace {

/// The `metadata_props` entries (key, value) of a message. ONNX 1.16 added
/// them to NodeProto (field 9) and GraphProto (field 16); Debian's ONNX
/// library predates that, so they are read from the unknown fields.
std::vector<std::pair<std::string, std::string>>
metadataProps(const google::protobuf::Message &m, int field) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto &unknown = m.GetReflection()->GetUnknownFields(m);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto &f = unknown.field(i);
    if (f.number() != field ||
        f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(f.length_delimited()))
      out.push_back({entry.key(), entry.value()});
  }
  return out;
}

/// For a binary elementwise node (Add, Sub, Mul, Div) made from the aten
/// call of the same name, the PyTorch parameter that call passes where the
/// node reads `init` (LayerScale's `x * self.lambda1`, whose ones the
/// optimiser merged with the norms' weights), or "".
std::string
binaryOperandParameter(const onnx::NodeProto &n, llvm::StringRef init,
                       const std::map<std::string, std::string> &sig) {
  static const llvm::StringMap<llvm::StringRef> kAten = {
      {"Add", "aten.add.Tensor"},
      {"Sub", "aten.sub.Tensor"},
      {"Mul", "aten.mul.Tensor"},
      {"Div", "aten.div.Tensor"}};
  auto aten = kAten.find(n.op_type());
  std::string fx = nodeMetadata(n, "pkg.torch.onnx.fx_node");
  if (aten == kAten.end() || n.input_size() != 2 || n.input(0) == n.input(1) ||
      !fxCalls(fx, aten->second))
    return "";
  // Both operands FX values (a number among them: not this node's shape).
  std::vector<std::string> args = fxArgs(fx);
  if (args.size() != 2)
    return "";
  auto it = sig.find(args[n.input(0) == init ? 0 : 1]);
  return it == sig.end() ? "" : it->second;
}

} // namespace

std::string nodeMetadata(const onnx::NodeProto &n, llvm::StringRef key) {
  for (const auto &[k, v] : metadataProps(n, /*metadata_props=*/9))
    if (k == key)
      return v;
  return "";
}

/// The inputs of the kinds `kinds` (PARAMETER, BUFFER, ...) of a
/// torch.export graph signature, which the dynamo exporter stores in the
/// graph's metadata: variable (`p_x_y`) -> target ("x.y").
std::map<std::string, std::string>
signatureInputs(const onnx::GraphProto &g,
                llvm::ArrayRef<llvm::StringRef> kinds) {
  std::map<std::string, std::string> inputs;
  for (const auto &[key, value] : metadataProps(g, /*metadata_props=*/16)) {
    if (key != "pkg.torch.export.ExportedProgram.graph_signature")
      continue;
    llvm::SmallVector<llvm::StringRef> lines;
    llvm::StringRef(value).split(lines, '\n');
    for (llvm::StringRef line : lines) {
      auto [var, spec] = line.split(": ");
      auto [kind, rest] = spec.split(" target='");
      if (rest.empty() || !llvm::is_contained(kinds, kind))
        continue;
      inputs[var.trim().str()] = rest.split('\'').first.str();
    }
  }
  return inputs;
}

std::map<std::string, std::vector<std::string>>
foldSources(const onnx::GraphProto &g) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto &v : g.value_info())
    for (const auto &[key, value] : metadataProps(v, /*metadata_props=*/4)) {
      if (key != "pkg.onnxscript.optimizer.folded_from")
        continue;
      // A Python list's repr: "['getitem', 'model.x.weight', 'val_3']".
      llvm::SmallVector<llvm::StringRef> items;
      llvm::StringRef(value).trim().trim("[]").split(items, ',', -1, false);
      std::vector<std::string> &names = out[v.name()];
      for (llvm::StringRef item : items)
        names.push_back(item.trim().trim("'\"").str());
    }
  return out;
}

/// The parameter names (`p_x_y` -> "x.y") of the graph signature.
std::map<std::string, std::string> signatureParams(const onnx::GraphProto &g) {
  return signatureInputs(g, {"PARAMETER"});
}

bool strippedDynamoExport(const onnx::ModelProto &m,
                          const std::map<std::string, std::string> &sig) {
  const onnx::GraphProto &g = m.graph();
  if (m.producer_name() != "pytorch" || g.node_size() == 0 || !sig.empty())
    return false;
  int named = 0;
  for (const auto &n : g.node()) {
    if (!nodeMetadata(n, "pkg.torch.onnx.fx_node").empty() ||
        !nodeMetadata(n, "pkg.torch.onnx.name_scopes").empty())
      return false;
    named += llvm::StringRef(n.name()).starts_with("node_");
  }
  // onnxscript names the dynamo exporter's nodes node_<op>_<n>; the
  // TorchScript exporter /<module path>/<Op> or <Op>_<n>.
  return 2 * named > g.node_size();
}

/// The PyTorch parameter (its module path) that node `n` read where the
/// ONNX graph reads the merged initializer `init`, from the dynamo
/// exporter's `pkg.torch.onnx.fx_node` metadata: of the `%p_...` arguments
/// of the node's aten call, the one whose name ends like `init` (".weight",
/// ".bias"); failing that, for a binary elementwise node, the parameter its
/// call passes in `init`'s place. Empty when that is not exactly one.
std::string torchParameterRead(const onnx::NodeProto &n, llvm::StringRef init,
                               const std::map<std::string, std::string> &sig) {
  llvm::StringRef suffix = init.rsplit('.').second;
  if (suffix.empty())
    return binaryOperandParameter(n, init, sig);
  std::string found;
  for (const std::string &var :
       fxArgs(nodeMetadata(n, "pkg.torch.onnx.fx_node"), "%p_", ",) ]")) {
    auto it = sig.find(var);
    if (it == sig.end())
      continue;
    if (!llvm::StringRef(it->second).ends_with("." + suffix.str()))
      continue;
    if (!found.empty() && found != it->second)
      return "";
    found = it->second;
  }
  return found.empty() ? binaryOperandParameter(n, init, sig) : found;
}

/// The PyTorch parameters node `n`'s aten call takes (its `%p_...`
/// arguments), sorted and joined by ", "; empty when it takes none.
std::string torchCallParameters(const onnx::NodeProto &n,
                                const std::map<std::string, std::string> &sig) {
  std::set<std::string> params;
  for (const std::string &var :
       fxArgs(nodeMetadata(n, "pkg.torch.onnx.fx_node"), "%p_", ",) ]")) {
    auto it = sig.find(var);
    if (it != sig.end())
      params.insert(it->second);
  }
  std::string out;
  for (const std::string &p : params)
    out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::vector<std::string> fxArgTexts(llvm::StringRef fx) {
  llvm::StringRef args = fx.split("args = (").second;
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : args) {
    if (depth == 0 && (c == ',' || c == ')')) {
      out.push_back(llvm::StringRef(cur).trim().str());
      cur.clear();
      if (c == ')')
        break;
      continue;
    }
    depth +=
        (c == '(' || c == '[' || c == '{') - (c == ')' || c == ']' || c == '}');
    cur += c;
  }
  return out;
}

bool fxCalls(llvm::StringRef fx, llvm::StringRef target) {
  return fx.contains(("[target=torch.ops." + target + "](").str());
}

bool groupNormInstanceNorm(const onnx::NodeProto &n) {
  if (n.op_type() != "InstanceNormalization")
    return false;
  std::string fx = nodeMetadata(n, "pkg.torch.onnx.fx_node");
  return fxCalls(fx, "aten.group_norm.default") ||
         fxCalls(fx, "aten.native_group_norm.default");
}

namespace {
/// ONNX norm ops, the aten calls they translate, and the aten argument
/// each one's optional affine inputs (1: scale, 2: bias) come from.
struct NormSource {
  llvm::StringRef op, aten;
  int scaleArg;
};
const NormSource kNormSources[] = {
    {"LayerNormalization", "aten.layer_norm.default", 2},
    {"LayerNormalization", "aten.native_layer_norm.default", 2},
    {"GroupNormalization", "aten.group_norm.default", 2},
    {"RMSNormalization", "aten.rms_norm.default", 2},
    {"InstanceNormalization", "aten.instance_norm.default", 1},
    {"BatchNormalization", "aten.batch_norm.default", 1},
    {"BatchNormalization", "aten._native_batch_norm_legit_no_training.default",
     1},
    {"BatchNormalization", "aten._native_batch_norm_legit.default", 1},
    {"BatchNormalization", "aten.native_batch_norm.default", 1}};

/// Whether the norm call `fx` (of kNormSources' `s`) passes None as its
/// affine argument `input` (1: weight, 2: bias).
bool passesNone(llvm::StringRef fx, const NormSource &s, int input) {
  std::vector<std::string> args = fxArgTexts(fx);
  size_t at = static_cast<size_t>(s.scaleArg + input - 1);
  return at < args.size() && args[at] == "None";
}
} // namespace

bool readsExporterConstant(const onnx::NodeProto &n, int input) {
  if (input != 1 && input != 2)
    return false;
  // GroupNorm's translation: its scale and bias are never the call's.
  if (groupNormInstanceNorm(n))
    return true;
  std::string fx = nodeMetadata(n, "pkg.torch.onnx.fx_node");
  for (const NormSource &s : kNormSources)
    if (n.op_type() == s.op && fxCalls(fx, s.aten))
      return passesNone(fx, s, input);
  return false;
}

bool normWithoutAffine(llvm::StringRef fx) {
  return llvm::any_of(kNormSources, [&](const NormSource &s) {
    return fxCalls(fx, s.aten) &&
           (passesNone(fx, s, 1) || passesNone(fx, s, 2));
  });
}

/// Whether the parameter lists (torchCallParameters) are each equal or
/// share no parameter.
bool disjointCalls(llvm::ArrayRef<std::string> calls) {
  std::map<std::string, std::string> callOf; // parameter -> its list
  for (const std::string &c : calls) {
    llvm::SmallVector<llvm::StringRef> params;
    llvm::StringRef(c).split(params, ", ");
    for (llvm::StringRef p : params) {
      auto [it, fresh] = callOf.insert({p.str(), c});
      if (!fresh && it->second != c)
        return false;
    }
  }
  return true;
}

} // namespace smp::onnx_frontend
