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

#include "FxGraph.h"

namespace smp::onnx_frontend {
namespace {

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

/// Initializer i holds rows of an embedding, some repeated: name#rows
/// [distinct x last] and name#index [leading dims] make `name` again with a
/// Gather; name#rows is trained.
void gatherDistinctRows(onnx::GraphProto &g, int i, mlir::RankedTensorType type,
                        const std::string &bytes, const Rows &rows,
                        int64_t last, const std::string &note,
                        const std::string &sums, const std::string &advice,
                        std::vector<ParamOrigin> &origins,
                        std::vector<std::string> &warnings) {
  std::string name = g.initializer(i).name(), rowsName = name + "#rows",
              indexName = name + "#index";
  std::string data;
  for (int64_t f : rows.firstOf)
    data.append(bytes.data() + f * rows.rowBytes, rows.rowBytes);
  refillInitializer(g, i, rowsName,
                    {static_cast<int64_t>(rows.firstOf.size()), last}, data);
  onnx::TensorProto index;
  index.set_name(indexName);
  index.set_data_type(onnx::TensorProto::INT64);
  for (int d = 0; d + 1 < type.getRank(); ++d)
    index.add_dims(type.getShape()[d]);
  index.set_raw_data(
      std::string(reinterpret_cast<const char *>(rows.index.data()),
                  rows.index.size() * sizeof(int64_t)));
  *g.add_initializer() = std::move(index);
  onnx::NodeProto *gather = g.add_node();
  gather->set_op_type("Gather");
  gather->set_name("smp.folded." + name);
  gather->add_input(rowsName);
  gather->add_input(indexName);
  gather->add_output(name);
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

/// Whether `op` transposes a matrix.
bool transposeOp(llvm::StringRef op) {
  return op == "t" || op == "transpose" || op == "permute";
}

/// The fold `t` of op `op` holds each element of `param` once
/// (attributeMoves): trained as it is; a matrix transposed (`self.weight.T`)
/// is exported by checkpoints as PyTorch's.
void trainMoved(const onnx::TensorProto &t, llvm::StringRef op,
                const std::string &param, FxGraph &fx,
                std::vector<ParamOrigin> &origins) {
  origins.push_back({t.name(), t.name(), "folded", false, {}});
  if (transposeOp(op) && t.dims_size() == 2)
    origins.push_back({t.name(), param, "renamed", true, {}});
  fx.trainedMoves.push_back("'" + t.name() + "' (" + param + ", aten." +
                            op.str() + ")");
}

/// A float initializer's type and bytes; std::nullopt for another type.
llvm::Expected<std::optional<std::pair<mlir::RankedTensorType, std::string>>>
readFloat(const onnx::TensorProto &t, mlir::MLIRContext *ctx,
          llvm::StringRef modelDir) {
  auto type = checkTensor(ctx, t, modelDir.str());
  if (!type) {
    llvm::consumeError(type.takeError());
    return std::nullopt;
  }
  if (!mlir::isa<mlir::FloatType>(type->getElementType()))
    return std::nullopt;
  auto bytes = readTensorBytes(t, *type, modelDir.str());
  if (!bytes)
    return bytes.takeError();
  return std::make_pair(*type, std::move(*bytes));
}

/// Initializer i's type and bytes if it is a float fold: an FX value that
/// no parameter is and a surviving node reads; std::nullopt otherwise.
llvm::Expected<std::optional<std::pair<mlir::RankedTensorType, std::string>>>
readFold(const onnx::GraphProto &g, int i, FxGraph &fx, mlir::MLIRContext *ctx,
         llvm::StringRef modelDir) {
  const onnx::TensorProto &t = g.initializer(i);
  if (fx.sigTargets.count(t.name()) || !fx.foldedReaders.count(t.name()))
    return std::nullopt;
  return readFloat(t, ctx, modelDir);
}

/// What the float initializer `name` holds (unmergeCalls's merged folds).
FoldValue foldValue(const onnx::GraphProto &g, llvm::StringRef name,
                    mlir::MLIRContext *ctx, llvm::StringRef modelDir) {
  for (const onnx::TensorProto &t : g.initializer()) {
    if (t.name() != name)
      continue;
    auto fold = readFloat(t, ctx, modelDir);
    if (!fold) {
      llvm::consumeError(fold.takeError());
      return FoldValue::Other;
    }
    if (!*fold)
      return FoldValue::Other;
    int64_t es = elementSize(t.data_type());
    if (constantRow((*fold)->second, es))
      return FoldValue::Constant;
    return holdsSinusoidTable((*fold)->first.getShape(), (*fold)->second, es)
               ? FoldValue::Sinusoid
               : FoldValue::Other;
  }
  return FoldValue::Other;
}

/// Whether a fold holds unequal rows of a gone parameter (an embedding
/// gathered at constant positions, which the rules below train as that
/// parameter's rows): the gone parameter it came from is not constant.
/// (Not an expand or a repeat: those also copy buffers, rotary tables.)
bool goneParameterVaries(const onnx::GraphProto &g, FxGraph &fx,
                         mlir::MLIRContext *ctx, llvm::StringRef modelDir) {
  for (int i = 0; i < g.initializer_size(); ++i) {
    if (fxOp(g.initializer(i).name()) != "embedding")
      continue;
    auto fold = readFold(g, i, fx, ctx, modelDir);
    if (!fold) {
      llvm::consumeError(fold.takeError()); // reported when resolved
      continue;
    }
    int64_t es = elementSize(g.initializer(i).data_type());
    if (*fold && !constantRow((*fold)->second, es) &&
        !holdsMaskValue((*fold)->second, es))
      return true;
  }
  return false;
}

/// The folded rows of an embedding gathered at constant positions, or of
/// a parameter expanded or repeated (`copies`), trained as the gone
/// parameter's rows (step 2 of resolveFoldedInitializer), or refused where
/// a row cannot be told apart.
llvm::Error trainFoldedRows(onnx::GraphProto &g, int i, llvm::StringRef path,
                            FxGraph &fx, const mlir::RankedTensorType &type,
                            const std::string &bytes, int64_t es,
                            llvm::StringRef op, bool copies,
                            std::vector<ParamOrigin> &origins,
                            std::vector<std::string> &warnings) {
  const onnx::TensorProto &t = g.initializer(i);
  // Rows of an embedding weight gathered at constant indices. PyTorch
  // sums the gradients of every position that gathered one row: train
  // the distinct rows, gathered back into the folded shape.
  int64_t last = type.getShape().back();
  Rows rows = distinctRows(bytes, last * es);
  for (int64_t f : rows.firstOf) {
    llvm::StringRef row(bytes.data() + f * rows.rowBytes, rows.rowBytes);
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
  gatherDistinctRows(g, i, type, bytes, rows, last, note,
                     copies ? "the parameter's rows, each one's gradient "
                              "summed over its copies"
                            : "one parameter row per distinct row, its "
                              "gradient summed over the positions that read "
                              "it",
                     advice, origins, warnings);
  return llvm::Error::success();
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
  auto fold = readFold(g, i, fx, ctx, modelDir);
  if (!fold)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   path + ": " +
                                       llvm::toString(fold.takeError()));
  if (!*fold)
    return llvm::Error::success();
  const mlir::RankedTensorType *type = &(*fold)->first;
  const std::string *bytes = &(*fold)->second;
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
  // Its record names no parameter: a buffer's or constants' value, however
  // many parameters are gone (a mask's fold beside Funnel's folded
  // `r_w_bias * scale`, which its own record names).
  if (fx.foldedWithoutParameters(t.name())) {
    if (!constant && !infinite) // else the shared-initializer rules freeze it
      frozen.insert(t.name());
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
  // Where one parameter is gone and another fold holds its rows, unequal
  // (DeBERTa's position embedding gathered at constant positions), that
  // parameter is not constant, so no move or copy of it is: this fold is
  // a buffer's (DeBERTa's all-ones mask, unsqueezed).
  bool notTheGone = fx.vanished.size() == 1 && fx.goneVaries &&
                    (kBijections.contains(op) || copies);
  if (constant && !infinite &&
      (!owner.empty() ||
       (!fx.vanished.empty() && onlyMoves(op) && !notTheGone)))
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
  // shrink 1 + w, not w) cannot be trained as the parameter, nor can a
  // copy of it (its record lists ops that compute).
  if ((op != "embedding" && !copies) || type->getRank() < 2 ||
      (copies && !fx.foldedBeyond(t.name(), "", onlyMoves).empty())) {
    std::string record = fx.foldRecord(t.name());
    return refuse(
        path, "initializer '" + t.name() +
                  "' holds a value the exporter's optimiser "
                  "folded " +
                  (record.empty() ? "(an aten." + op.str() + " of constants)"
                                  : record) +
                  ", and PyTorch parameter(s) " + joinNames(fx.vanished) +
                  " are gone from the file: smp cannot tell "
                  "which parameter it holds or how to train it");
  }
  // A sinusoidal position table's rows gathered at positions 0..P-1
  // (Marian's, Pegasus's; the table a parameter PyTorch keeps with
  // requires_grad=False): left to the shared-initializer rules, which
  // freeze it with a warning (or train it with --trainable).
  if (op == "embedding" && holdsSinusoidTable(type->getShape(), *bytes, es))
    return llvm::Error::success();
  // An embedding's rows gathered at constant positions, or a parameter
  // broadcast (aten.expand: ViT's class token over a fixed batch) or tiled
  // (aten.repeat): each element a copy of a parameter element, whose
  // gradient PyTorch sums over its copies, as the distinct rows' Gather does.
  return trainFoldedRows(g, i, path, fx, *type, *bytes, es, op, copies, origins,
                         warnings);
}

/// PyTorch's parameters that the fold `holder`'s other rows hold, where
/// its record says the fold is a cat of the tied weight `source` and
/// parameters gone from the file, each only moved (kBijections): the
/// other rows then train as those parameters do. Sets `torchName` where
/// one parameter, not transposed, holds them all. std::nullopt otherwise
/// (left to resolveFoldedInitializer's rules, which refuse it).
std::optional<std::vector<std::string>>
restParameters(FxGraph &fx, const TiedBlock &b, std::string &torchName) {
  if (fxOp(b.holder) != "cat")
    return std::nullopt;
  std::vector<std::string> others;
  int transposes = 0;
  bool renamable = true;
  for (const std::string &s : fx.sourcesOf(b.holder)) {
    if (llvm::StringRef(s).starts_with("val_") || s == b.source)
      continue;
    auto alias = fx.aliases.find(s);
    if (alias != fx.aliases.end() && alias->second == b.source)
      continue;
    if (fx.sigTargets.count(s) || llvm::StringRef(s).contains('.')) {
      // Another tensor: only a parameter gone from the file (one in the
      // file, or a buffer, would be trained apart from its copy).
      if (!llvm::is_contained(fx.vanished, s))
        return std::nullopt;
      others.push_back(s);
      continue;
    }
    llvm::StringRef op = fxOp(s);
    if (!kBijections.contains(op) && op != "cat")
      return std::nullopt;
    transposes += transposeOp(op);
    renamable &= transposeOp(op) || op == "cat";
  }
  if (others.empty())
    return std::nullopt;
  if (others.size() == 1 && renamable && transposes == (b.transposed ? 1 : 0))
    torchName = others.front();
  return others;
}

/// 1b. Folds whose record names a parameter in the file whose values (or
/// their transpose) fill their leading or trailing rows beside parameters
/// gone from the file (MobileBERT's `cat([decoder.weight.t(),
/// dense.weight])`): split into Concat(tied weight, rest), the rest
/// trained as the gone parameters (TiedBlocks.cpp), which are added to
/// `explained`. Before the rules' FxGraph is made: the fold gone, a tie
/// in its module (`cls.predictions.bias`, read as `decoder.bias`) is seen.
llvm::Error splitFoldedTiedBlocks(onnx::GraphProto &g, llvm::StringRef path,
                                  const std::map<std::string, std::string> &sig,
                                  std::set<std::string> &explained,
                                  std::vector<ParamOrigin> &origins,
                                  std::vector<std::string> &warnings,
                                  mlir::MLIRContext *ctx,
                                  llvm::StringRef modelDir) {
  if (llvm::none_of(g.initializer(), [](const onnx::TensorProto &t) {
        return t.dims_size() == 2 && fxOp(t.name()) == "cat";
      }))
    return llvm::Error::success(); // no fold of a cat: nothing to read
  FxGraph fx(g, sig);
  std::set<std::string> named; // parameters some fold's record names
  for (int i = 0; i < g.initializer_size(); ++i)
    if (!fx.sigTargets.count(g.initializer(i).name()))
      for (const std::string &s : fx.sourcesOf(g.initializer(i).name()))
        named.insert(s);
  // The views' names and bytes (splitTiedBlock renames initializers).
  std::vector<std::string> names, bytes;
  names.reserve(g.initializer_size());
  bytes.reserve(g.initializer_size());
  std::vector<MatrixView> views;
  for (int i = 0; i < g.initializer_size(); ++i) {
    const onnx::TensorProto &t = g.initializer(i);
    bool param = fx.sigTargets.count(t.name()) > 0;
    if (t.dims_size() != 2 || (param && !named.count(t.name())) ||
        (!param && (fxOp(t.name()) != "cat" || !fx.initNames.count(t.name()))))
      continue;
    auto read = readFloat(t, ctx, modelDir);
    if (!read)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     path + ": " +
                                         llvm::toString(read.takeError()));
    if (!*read)
      continue;
    names.push_back(t.name());
    bytes.push_back(std::move((*read)->second));
    views.push_back({names.back(), t.dims(0), t.dims(1),
                     elementSize(t.data_type()), t.data_type(), bytes.back()});
  }
  auto folded = [&](const MatrixView &holder, const MatrixView &source) {
    return !fx.sigTargets.count(holder.name.str()) &&
           fx.sigTargets.count(source.name.str()) &&
           llvm::is_contained(fx.sourcesOf(holder.name.str()),
                              source.name.str());
  };
  for (const TiedBlock &b : findTiedBlocks(views, folded)) {
    std::string torchName;
    auto rest = restParameters(fx, b, torchName);
    if (!rest)
      continue;
    auto holder = llvm::find_if(
        views, [&](const MatrixView &v) { return v.name == b.holder; });
    splitTiedBlock(g, b, holder->bytes, holder->elementSize, true, torchName,
                   origins, warnings);
    explained.insert(rest->begin(), rest->end());
  }
  return llvm::Error::success();
}

} // namespace

void refillInitializer(onnx::GraphProto &g, int i, const std::string &name,
                       llvm::ArrayRef<int64_t> dims, std::string raw) {
  onnx::TensorProto &t = *g.mutable_initializer(i);
  std::string old = t.name();
  t.set_name(name);
  t.clear_dims();
  for (int64_t d : dims)
    t.add_dims(d);
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int32_data();
  t.clear_data_location();
  t.clear_external_data();
  t.set_raw_data(std::move(raw));
  auto *ins = g.mutable_input();
  for (int k = 0; k < ins->size(); ++k)
    if (ins->Get(k).name() == old) {
      ins->DeleteSubrange(k, 1);
      break;
    }
}

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
  auto valueOf = [&](llvm::StringRef name) {
    return foldValue(g, name, ctx, modelDir);
  };
  if (llvm::Error err = unmergeCalls(g, path, sig, valueOf, origins))
    return err;
  std::set<std::string> explained;
  if (llvm::Error err = splitFoldedTiedBlocks(g, path, sig, explained, origins,
                                              warnings, ctx, modelDir))
    return err;
  FxGraph fx(g, sig);
  llvm::erase_if(fx.vanished,
                 [&](const std::string &v) { return explained.count(v) > 0; });
  // A tied parameter's other name, for checkpoints (torch.export keeps
  // one; PyTorch's state_dict has both).
  for (const auto &[alias, read] : fx.aliases)
    origins.push_back({read, alias, "alias", false, {}});
  fx.attributeMoves();
  fx.goneVaries = goneParameterVaries(g, fx, ctx, modelDir);
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
