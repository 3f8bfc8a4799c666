//===- TiedBlocks.cpp - A weight folded beside other rows -----------------===//
//
// A tied weight can reach the file inside a value constant folding
// computed: MobileBERT's LM head multiplies by `cat([decoder.weight.t(),
// dense.weight])`, its decoder tied to the word embeddings, and both
// exporters fold the cat into one initializer (TorchScript's
// `onnx::MatMul_N`, the dynamo optimiser's `cat_1`) whose first rows are
// the embeddings' transpose. Trained as a parameter of its own (a MatMul's
// operand: a Linear's weight, only moved), the tie is lost: the embeddings
// and the head train apart, AdamW's gradient norms 9.7% off PyTorch's by
// step 2. Such a fold becomes Concat(Transpose(embeddings), rest): its
// other rows a parameter of their own (`<fold>#rest`, which the dynamo
// exporter's record names where it can: dense.weight), the tied rows read
// from the weight they copy, as PyTorch computes them; --save-onnx writes
// the fold back (runtime/train/lib/OnnxExport.cpp).
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include <cstring>

namespace smp::onnx_frontend {

std::string transposeMatrix(llvm::StringRef bytes, int64_t rows, int64_t cols,
                            int64_t elementSize) {
  std::string out(bytes.size(), '\0');
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      std::memcpy(&out[(j * rows + i) * elementSize],
                  bytes.data() + (i * cols + j) * elementSize, elementSize);
  return out;
}

namespace {

/// Whether rows [first, first + height) of `holder` hold `source`'s rows
/// (or, transposed, its columns), compared row by row: most candidates
/// differ in their first element, so no block is copied (a GPT-2 export's
/// folded weights are tens of megabytes each).
bool holdsBlock(const MatrixView &holder, int64_t first, int64_t height,
                const MatrixView &source, bool transposed) {
  int64_t es = holder.elementSize, width = holder.cols;
  size_t rowBytes = static_cast<size_t>(width * es);
  std::string column(rowBytes, '\0');
  for (int64_t r = 0; r < height; ++r) {
    llvm::StringRef row = holder.bytes.substr((first + r) * rowBytes, rowBytes);
    if (!transposed) {
      if (row != source.bytes.substr(r * rowBytes, rowBytes))
        return false;
      continue;
    }
    // Row r of the transpose: column r of source ([width, height]).
    for (int64_t j = 0; j < width; ++j)
      std::memcpy(&column[j * es], source.bytes.data() + (j * height + r) * es,
                  es);
    if (row != column)
      return false;
  }
  return true;
}

} // namespace

std::vector<TiedBlock> findTiedBlocks(
    llvm::ArrayRef<MatrixView> inits,
    llvm::function_ref<bool(const MatrixView &holder, const MatrixView &source)>
        accept) {
  std::vector<TiedBlock> out;
  for (const MatrixView &holder : inits) {
    bool found = false;
    for (const MatrixView &source : inits) {
      if (found || &source == &holder || source.type != holder.type ||
          source.elementSize != holder.elementSize || !accept(holder, source))
        continue;
      // The rows a copy (cols wide) or the transpose (rows wide) takes.
      for (bool transposed : {false, true}) {
        int64_t width = transposed ? source.rows : source.cols;
        int64_t height = transposed ? source.cols : source.rows;
        if (width != holder.cols || height >= holder.rows)
          continue;
        for (int64_t first : {int64_t{0}, holder.rows - height})
          if (!found && holdsBlock(holder, first, height, source, transposed)) {
            out.push_back({holder.name.str(), source.name.str(), transposed,
                           first, height, holder.rows});
            found = true; // one block a holder
          }
      }
    }
  }
  return out;
}

void addCopyNode(onnx::GraphProto &g, const std::string &name,
                 const std::string &in, const std::string &out,
                 bool transposed) {
  onnx::NodeProto *node = g.add_node();
  node->set_op_type(transposed ? "Transpose" : "Identity");
  node->set_name(name);
  node->add_input(in);
  node->add_output(out);
  if (!transposed)
    return;
  auto *perm = node->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  perm->add_ints(1);
  perm->add_ints(0);
}

std::pair<std::string, std::string>
splitTiedBlock(onnx::GraphProto &g, const TiedBlock &b, llvm::StringRef bytes,
               int64_t elementSize, bool recorded, llvm::StringRef torchName,
               std::vector<ParamOrigin> &origins,
               std::vector<std::string> &warnings) {
  int64_t cols =
              static_cast<int64_t>(bytes.size()) / elementSize / b.holderRows,
          restRows = b.holderRows - b.rows;
  size_t rowBytes = static_cast<size_t>(cols * elementSize);
  // The other rows: after the block where it leads, before it where it
  // trails.
  int64_t restFirst = b.firstRow == 0 ? b.rows : 0;
  std::string rest =
      bytes.substr(restFirst * rowBytes, restRows * rowBytes).str();
  std::string restName = b.holder + "#rest", tiedName = b.holder + "#tied";
  for (int i = 0; i < g.initializer_size(); ++i)
    if (g.initializer(i).name() == b.holder) {
      refillInitializer(g, i, restName, {restRows, cols}, rest);
      break;
    }
  std::string tied = b.source;
  if (b.transposed) {
    addCopyNode(g, "smp.tied-block." + tiedName, b.source, tiedName, true);
    tied = tiedName;
  }
  onnx::NodeProto *cat = g.add_node();
  cat->set_op_type("Concat");
  cat->set_name("smp.tied-block." + b.holder);
  cat->add_input(b.firstRow == 0 ? tied : restName);
  cat->add_input(b.firstRow == 0 ? restName : tied);
  cat->add_output(b.holder);
  auto *axis = cat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  ParamOrigin o{restName,
                b.holder,
                "tied-block",
                b.transposed,
                {{static_cast<int>(b.firstRow), static_cast<int>(b.rows)}},
                rest};
  o.source = b.source;
  origins.push_back(std::move(o));
  if (!torchName.empty()) {
    ParamOrigin named{restName, torchName.str(), "renamed", false, {}};
    named.why = "the rows of the fold '" + b.holder + "' beside the tied '" +
                b.source + "', as the exporter's record names them";
    origins.push_back(std::move(named));
  }
  // The dynamo exporter's record names the weight: a tie for certain. In
  // other files only the values say so, which --untie can overrule.
  std::string advice =
      recorded ? std::string("; the exporter's record of the fold names '") +
                     b.source + "'"
               : "; pass --untie " + b.holder + " if the two are separate";
  warnings.push_back(
      "initializer '" + b.holder + "', a value the exporter computed by " +
      "constant folding, holds " +
      (b.transposed ? "the transpose of '" : "a copy of '") + b.source +
      "' in its rows " + std::to_string(b.firstRow) + ".." +
      std::to_string(b.firstRow + b.rows - 1) + " of " +
      std::to_string(b.holderRows) +
      " (a tied weight folded with other values: MobileBERT's LM head "
      "multiplies by cat([decoder.weight.t(), dense.weight])): smp reads "
      "those rows from '" +
      b.source + "', as PyTorch computes them, and trains the other " +
      std::to_string(restRows) + " as '" + restName + "'" +
      (torchName.empty() ? std::string()
                         : " (PyTorch's " + torchName.str() + ")") +
      "; --save-onnx writes '" + b.holder + "' back" + advice);
  return {restName, std::move(rest)};
}

std::string recordedTieUntied(llvm::ArrayRef<ParamOrigin> origins,
                              llvm::StringRef untie) {
  const ParamOrigin *block = llvm::find_if(origins, [&](const ParamOrigin &o) {
    return o.kind == "tied-block" && o.from == untie;
  });
  if (block == origins.end())
    return "";
  auto [first, rows] = block->uses.front();
  return "--untie " + untie.str() + ": the exporter's record of the fold '" +
         untie.str() + "' says PyTorch computed it from '" + block->source +
         "' (its rows " + std::to_string(first) + ".." +
         std::to_string(first + rows - 1) +
         "): they are one parameter, which smp trains as PyTorch does; drop "
         "--untie " +
         untie.str();
}

} // namespace smp::onnx_frontend
