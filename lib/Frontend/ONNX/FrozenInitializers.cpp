//===- FrozenInitializers.cpp - Float initializers that are not trained ---===//
//
// Every float initializer of more than one element becomes a parameter
// unless a rule says it is a buffer (kept, frozen: no gradient, no optimizer
// state). SharedInitializers.cpp freezes those that hold infinities and,
// under the dynamo exporter's graph signature, constant-valued ones the
// signature does not list; FoldedParameters.cpp freezes FX values folded
// from buffers. This file holds two more rules, each where the file proves
// that PyTorch trains nothing there:
//
//  - No gradient path: every use of the initializer reaches, through
//    data-movement ops only (Identity, Slice, Reshape, Gather, ...), an
//    input without a derivative (a comparison, a cast to integers or bool,
//    Shape, the class weights of SoftmaxCrossEntropyLoss and
//    NegativeLogLikelihoodLoss). PyTorch leaves such a tensor's .grad None, and
//    its optimizers skip a parameter whose .grad is None (no step, no weight
//    decay, no state); a buffer it is anyway (the legacy TorchScript export of
//    a GPT's causal `tril` buffer: Slice -> Equal -> Where's condition).
//  - A dynamo constant fold: in a file with the dynamo exporter's graph
//    signature, a float initializer that no PARAMETER target names, that is
//    not an FX value (`embedding_1`: FoldedParameters.cpp decides those),
//    and that only nodes of aten calls taking no parameter (no `%p_...`
//    argument in their `pkg.torch.onnx.fx_node` metadata) read. The
//    optimiser folded it from constants, shapes and buffers: HF GPT-2's,
//    OPT's, Llama's causal + padding mask (`val_160`, finfo.min and 0). An
//    initializer that a parameter's call reads (`val_37`: the folded
//    transpose of a Linear's weight, whose own initializer is gone) stays a
//    parameter, trained as that weight.
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

namespace smp::onnx_frontend {
namespace {

bool isDefaultDomain(const std::string &d) {
  return d.empty() || d == "ai.onnx";
}

/// Whether input `k` of `op` has no derivative: every input of an op whose
/// outputs are bool, integer or a shape, and a loss's class weights
/// (PyTorch's cross_entropy / nll_loss give `weight` no gradient).
bool noDerivative(llvm::StringRef op, int k) {
  static const llvm::StringSet<> ops = {
      "Equal", "Less",   "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
      "And",   "Or",     "Xor",     "IsNaN",       "IsInf",          "Shape",
      "Size",  "ArgMax", "ArgMin",  "NonZero"};
  if (op == "SoftmaxCrossEntropyLoss" || op == "NegativeLogLikelihoodLoss")
    return k == 2;
  return ops.contains(op);
}

/// Ops that move input `k`'s values into their outputs unchanged (the
/// gradient is the values' own, moved back).
bool movesData(llvm::StringRef op, int k) {
  static const llvm::StringSet<> dataFirst = {
      "Identity",  "Reshape", "Unsqueeze", "Squeeze", "Flatten",
      "Transpose", "Expand",  "Slice",     "Gather",  "GatherElements",
      "GatherND",  "Tile",    "Split"};
  return op == "Concat" || (k == 0 && dataFirst.contains(op));
}

bool isFloatType(int64_t t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::DOUBLE ||
         t == onnx::TensorProto::FLOAT16 || t == onnx::TensorProto::BFLOAT16;
}

/// A Cast's target type, or -1.
int64_t castTo(const onnx::NodeProto &n) {
  for (const auto &a : n.attribute())
    if (a.name() == "to")
      return a.i();
  return -1;
}

/// The readers (node, input index) of every value.
using Readers = std::map<std::string, std::vector<std::pair<int, int>>>;

Readers readersOf(const onnx::GraphProto &g) {
  Readers r;
  for (int i = 0; i < g.node_size(); ++i)
    for (int k = 0; k < g.node(i).input_size(); ++k)
      if (!g.node(i).input(k).empty())
        r[g.node(i).input(k)].push_back({i, k});
  return r;
}

/// Whether no gradient can reach `init` (the first rule above). False when
/// nothing reads it, or when a value it moves into is a graph output.
bool gradientFree(const onnx::GraphProto &g, const std::string &init,
                  const Readers &readers, const llvm::StringSet<> &outputs) {
  std::vector<std::string> work{init};
  llvm::StringSet<> seen{init};
  bool used = false;
  while (!work.empty()) {
    std::string v = work.back();
    work.pop_back();
    if (outputs.contains(v))
      return false;
    auto it = readers.find(v);
    if (it == readers.end())
      continue;
    for (auto [i, k] : it->second) {
      const onnx::NodeProto &n = g.node(i);
      if (!isDefaultDomain(n.domain()))
        return false;
      used = true;
      if (noDerivative(n.op_type(), k) ||
          (n.op_type() == "Cast" && castTo(n) >= 0 && !isFloatType(castTo(n))))
        continue;
      if (!movesData(n.op_type(), k) && n.op_type() != "Cast")
        return false;
      for (const auto &o : n.output())
        if (!o.empty() && seen.insert(o).second)
          work.push_back(o);
    }
  }
  return used;
}

/// Whether `fx` (a node's `pkg.torch.onnx.fx_node`) passes `%name` to its
/// aten call (`prefix`: any argument whose name starts so).
bool fxPasses(llvm::StringRef fx, llvm::StringRef name, bool prefix) {
  llvm::StringRef args = fx.split("args = (").second;
  std::string token = "%" + name.str();
  for (size_t at = args.find(token); at != llvm::StringRef::npos;
       at = args.find(token, at + 1)) {
    if (prefix)
      return true;
    size_t end = at + token.size();
    if (end == args.size() || llvm::StringRef(",) ]}").contains(args[end]))
      return true;
  }
  return false;
}

/// Whether `init` is a dynamo constant fold (the second rule above).
bool dynamoConstantFold(const onnx::GraphProto &g, const std::string &init,
                        const Readers &readers) {
  auto it = readers.find(init);
  if (it == readers.end())
    return false;
  for (auto [i, k] : it->second) {
    std::string fx = nodeMetadata(g.node(i), "pkg.torch.onnx.fx_node");
    if (fx.empty() || fxPasses(fx, "p_", /*prefix=*/true) ||
        fxPasses(fx, init, /*prefix=*/false))
      return false;
  }
  return true;
}

} // namespace

std::map<std::string, std::string>
frozenByUse(const onnx::GraphProto &g, llvm::ArrayRef<std::string> candidates,
            const std::set<std::string> &paramTargets) {
  Readers readers = readersOf(g);
  llvm::StringSet<> outputs;
  for (const auto &o : g.output())
    outputs.insert(o.name());
  std::map<std::string, std::string> frozen;
  for (const std::string &name : candidates) {
    if (gradientFree(g, name, readers, outputs))
      frozen[name] = "no gradient reaches it: every use is a comparison, a "
                     "cast to integers or bool, a shape or a loss's class "
                     "weights";
    else if (!paramTargets.empty() && !paramTargets.count(name) &&
             !outputs.contains(name) && dynamoConstantFold(g, name, readers))
      frozen[name] = "the exporter's optimiser folded it from constants and "
                     "buffers, and no aten call that reads it takes a "
                     "parameter: an attention mask";
  }
  return frozen;
}

std::set<std::string> dynamoConstantFolds(const onnx::GraphProto &g) {
  Readers readers = readersOf(g);
  std::set<std::string> out;
  for (const auto &t : g.initializer())
    if (dynamoConstantFold(g, t.name(), readers))
      out.insert(t.name());
  return out;
}

std::set<std::string> settingInitializers(const onnx::GraphProto &g) {
  auto isSetting = [](const onnx::NodeProto &n, int k) {
    llvm::StringRef op = n.op_type();
    return isDefaultDomain(n.domain()) &&
           ((op == "Resize" && (k == 1 || k == 2)) ||
            (op == "Upsample" && k == 1));
  };
  std::set<std::string> settings, data;
  for (const auto &n : g.node())
    for (int k = 0; k < n.input_size(); ++k)
      if (!n.input(k).empty())
        (isSetting(n, k) ? settings : data).insert(n.input(k));
  for (const auto &o : g.output())
    data.insert(o.name());
  std::set<std::string> out;
  for (const auto &t : g.initializer())
    if (settings.count(t.name()) && !data.count(t.name()))
      out.insert(t.name());
  return out;
}

/// The node that computes `value`, or null.
static const onnx::NodeProto *producerOf(const onnx::GraphProto &g,
                                         const std::string &value) {
  for (const auto &n : g.node())
    if (llvm::is_contained(n.output(), value))
      return &n;
  return nullptr;
}

/// Whether node `n`, reading the fold as input `k`, is the affine step of
/// the TorchScript exporter's GroupNorm, in the norm's own scope:
/// `Mul(Reshape(InstanceNormalization(x)), w)` then `Add(that, b)`, the
/// fold its weight or bias unsqueezed to [C, 1] (each element once: a
/// move; Wav2Vec2's feature extractor, diffusers' UNets).
static bool groupNormAffine(const onnx::GraphProto &g, const onnx::NodeProto &n,
                            int k) {
  if (!isDefaultDomain(n.domain()) || n.input_size() != 2 ||
      (n.op_type() != "Mul" && n.op_type() != "Add"))
    return false;
  llvm::StringRef scope = llvm::StringRef(n.name()).rsplit('/').first;
  auto inScope = [&](const onnx::NodeProto *p, llvm::StringRef op) {
    return p && p->op_type() == op && !scope.empty() &&
           llvm::StringRef(p->name()).rsplit('/').first == scope;
  };
  const onnx::NodeProto *other = producerOf(g, n.input(1 - k));
  if (n.op_type() == "Add") // the bias, after the weight's Mul
    return inScope(other, "Mul") && llvm::any_of(llvm::seq(0, 2), [&](int j) {
             return generatedName(other->input(j)) &&
                    groupNormAffine(g, *other, j);
           });
  return inScope(other, "Reshape") &&
         inScope(producerOf(g, other->input(0)), "InstanceNormalization");
}

/// Whether node `n` reads a fold as its input `k` the way it reads a
/// parameter only moved: a MatMul's or Gemm's operand (a Linear's folded
/// transpose), a Conv's weight, a PRelu's slope, an Identity marker, a
/// GroupNorm's unsqueezed affine, a node of another domain, or the Concat
/// that rebuilds a fold beside a tied weight (splitTiedBlock) where every
/// node reads that fold so.
static bool movedRead(const onnx::GraphProto &g, const onnx::NodeProto &n,
                      int k) {
  llvm::StringRef op = n.op_type();
  if (op == "Concat" &&
      llvm::StringRef(n.name()).starts_with("smp.tied-block.") &&
      n.output_size() == 1)
    return llvm::all_of(g.node(), [&](const onnx::NodeProto &r) {
      return llvm::all_of(llvm::seq(0, r.input_size()), [&](int j) {
        return r.input(j) != n.output(0) || movedRead(g, r, j);
      });
    });
  return !isDefaultDomain(n.domain()) || op == "MatMul" || op == "Identity" ||
         (op == "Gemm" && k < 2) ||
         ((op == "Conv" || op == "ConvTranspose" || op == "PRelu") && k == 1) ||
         groupNormAffine(g, n, k);
}

/// torchScriptComputedFold with the graph's readers.
static bool computedFold(const onnx::GraphProto &g, const Readers &readers,
                         const std::string &name) {
  auto it = readers.find(name);
  return llvm::StringRef(name).starts_with("onnx::") && it != readers.end() &&
         llvm::any_of(it->second, [&](std::pair<int, int> r) {
           return !movedRead(g, g.node(r.first), r.second);
         });
}

bool torchScriptComputedFold(const onnx::GraphProto &g,
                             const std::string &name) {
  return computedFold(g, readersOf(g), name);
}

/// Whether at most half of the `elementSize`-byte values of `bytes` (at
/// most 8 bytes each: float types) are distinct. Sorted as integers, not
/// inserted into a set: GPT-2's folded position rows are 786,432 values.
static bool valuesRepeat(const std::string &bytes, int64_t elementSize) {
  if (elementSize <= 0 || elementSize > 8 ||
      bytes.size() < 2 * static_cast<size_t>(elementSize))
    return false;
  size_t n = bytes.size() / elementSize;
  std::vector<uint64_t> values(n, 0);
  for (size_t k = 0; k < n; ++k)
    std::memcpy(&values[k], bytes.data() + k * elementSize, elementSize);
  llvm::sort(values);
  size_t distinct = std::unique(values.begin(), values.end()) - values.begin();
  return 2 * distinct <= n;
}

/// The exports whose files say what a TorchScript fold was.
static const std::string kExportsThatSay =
    "Export with dynamo=True (torch.onnx.export's default since torch 2.9: "
    "its graph signature says) or smp.export";

/// "'a'", "'a', 'b'", ... "'a', 'b', 'c', 'd' and 2 more".
static std::string foldList(llvm::ArrayRef<std::string> names) {
  std::string list = "'" + names.front() + "'";
  for (size_t i = 1; i < names.size() && i < 4; ++i)
    list += ", '" + names[i] + "'";
  if (names.size() > 4)
    list += " and " + std::to_string(names.size() - 4) + " more";
  return list;
}

/// The first node that reads the computed fold `name` other than as a
/// moved parameter (computedFold says there is one).
static const onnx::NodeProto &computingReader(const onnx::GraphProto &g,
                                              const Readers &readers,
                                              const std::string &name) {
  for (auto [i, k] : readers.find(name)->second)
    if (!movedRead(g, g.node(i), k))
      return g.node(i);
  llvm_unreachable("computedFold found a computing reader");
}

std::vector<std::string>
torchScriptFoldsWarnings(const onnx::GraphProto &g,
                         llvm::ArrayRef<FoldCandidate> candidates) {
  Readers readers = readersOf(g);
  std::vector<std::string> repeating, distinct;
  for (const FoldCandidate &c : candidates)
    if (computedFold(g, readers, c.name))
      (valuesRepeat(*c.bytes, c.elementSize) ? repeating : distinct)
          .push_back(c.name);
  // "initializers 'a', 'b' are values ... (the name is the exporter's, not
  // a state_dict key<aside>)<what>, and a gradient reaches them: smp trains
  // each as a parameter of its own".
  auto lead = [](llvm::ArrayRef<std::string> names, const std::string &aside,
                 const char *what) {
    bool many = names.size() > 1;
    return "initializer" + std::string(many ? "s " : " ") + foldList(names) +
           (many ? " are values" : " is a value") +
           " the TorchScript exporter computed by constant folding (the "
           "name is the exporter's, not a state_dict key" +
           aside + ")" + what + ", and a gradient reaches " +
           (many ? "them" : "it") + ": smp trains " + (many ? "each" : "it") +
           " as a parameter of its own";
  };
  std::vector<std::string> out;
  if (!repeating.empty())
    out.push_back(
        lead(repeating, "", " whose values repeat") +
        ", but a buffer (BART's final_logits_bias) or a parameter's gather "
        "or arithmetic (Swin's relative position bias) looks the same, and "
        "PyTorch trains those otherwise. " +
        kExportsThatSay + ", or say which: --freeze '^" +
        llvm::Regex::escape(repeating.front()) +
        "$' (a buffer) or --trainable " + repeating.front() +
        " (a parameter, only moved)");
  // Distinct values: a parameter's rows (GPT's wpe.weight[:T], which
  // trains as its rows do) and a parameter's arithmetic (Funnel's
  // r_w_bias * scale, whose gradient PyTorch scales: trained silently, 0.3%
  // off from step 1) look the same.
  if (!distinct.empty()) {
    const onnx::NodeProto &reader =
        computingReader(g, readers, distinct.front());
    out.push_back(
        lead(distinct,
             "; " + reader.op_type() + " node '" + reader.name() + "' reads '" +
                 distinct.front() + "'",
             "") +
        ", which is PyTorch's training only for a parameter's rows or copy "
        "(GPT's position rows wpe.weight[:T]); a parameter's arithmetic "
        "(Funnel's r_w_bias * scale) trains otherwise. " +
        kExportsThatSay + ", or pass --trainable " + distinct.front() +
        (distinct.size() > 1 ? " for each that is a parameter's rows"
                             : " if it is a parameter's rows"));
  }
  return out;
}

std::set<std::string> readByParameterCalls(const onnx::GraphProto &g,
                                           llvm::ArrayRef<std::string> names) {
  Readers readers = readersOf(g);
  std::set<std::string> read;
  for (const std::string &name : names) {
    auto it = readers.find(name);
    if (it == readers.end())
      continue;
    for (auto [i, k] : it->second)
      if (fxPasses(nodeMetadata(g.node(i), "pkg.torch.onnx.fx_node"), "p_",
                   /*prefix=*/true)) {
        read.insert(name);
        break;
      }
  }
  return read;
}

bool holdsMaskValue(llvm::StringRef bytes, int64_t es) {
  for (size_t k = 0; k + es <= bytes.size(); k += es) {
    if (es == 4) {
      float v;
      std::memcpy(&v, bytes.data() + k, 4);
      if (std::isinf(v) || v == std::numeric_limits<float>::lowest())
        return true;
    } else if (es == 8) {
      double v;
      std::memcpy(&v, bytes.data() + k, 8);
      if (std::isinf(v) || v == std::numeric_limits<double>::lowest())
        return true;
    } else if (es == 2) {
      uint16_t h;
      std::memcpy(&h, bytes.data() + k, 2);
      // f16 and bf16: an infinity (all-ones exponent, zero mantissa) or
      // the lowest finite value (-65504: 0xfbff; bf16's: 0xff7f).
      uint16_t m = h & 0x7fff;
      if (m == 0x7c00 || m == 0x7f80 || h == 0xfbff || h == 0xff7f)
        return true;
    }
  }
  return false;
}

} // namespace smp::onnx_frontend
