//===- TiedBlocks.cpp - A weight folded beside other rows -----------------===//
//
// A tied weight can reach the file inside a value constant folding
// computed: MobileBERT's LM head multiplies by `cat([decoder.weight.t(),
// dense.weight])`, its decoder tied to the word embeddings, and the
// TorchScript exporter folds the cat into one initializer (`onnx::MatMul_N`)
// whose first rows are the embeddings' transpose. Trained as a parameter
// of its own (a MatMul's operand: a Linear's weight, only moved), the tie
// is lost: the embeddings and the head train apart, AdamW's gradient
// norms 9.7% off PyTorch's by step 2, silently. A fold whose leading or
// trailing rows hold another matrix initializer, or its transpose, beside
// other rows is refused, naming the exports that keep the tie; --untie
// says they are separate (SharedInitializers.cpp).
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

std::vector<TiedBlock> findTiedBlocks(llvm::ArrayRef<MatrixView> inits) {
  std::vector<TiedBlock> out;
  for (const MatrixView &holder : inits) {
    if (!generatedName(holder.name))
      continue;
    for (const MatrixView &source : inits) {
      if (&source == &holder || source.type != holder.type ||
          source.elementSize != holder.elementSize)
        continue;
      // The rows a copy (cols wide) or the transpose (rows wide) takes.
      for (bool transposed : {false, true}) {
        int64_t width = transposed ? source.rows : source.cols;
        int64_t height = transposed ? source.cols : source.rows;
        if (width != holder.cols || height >= holder.rows)
          continue;
        for (int64_t first : {int64_t{0}, holder.rows - height})
          if (holdsBlock(holder, first, height, source, transposed)) {
            out.push_back({holder.name.str(), source.name.str(), transposed,
                           first, height, holder.rows});
            break;
          }
      }
    }
  }
  return out;
}

std::string tiedBlockRefusal(const TiedBlock &b) {
  std::string rows = "rows " + std::to_string(b.firstRow) + ".." +
                     std::to_string(b.firstRow + b.rows - 1) + " of " +
                     std::to_string(b.holderRows);
  return "initializer '" + b.holder + "', a value the exporter computed by " +
         "constant folding, holds " +
         (b.transposed ? "the transpose of '" : "a copy of '") + b.source +
         "' in its " + rows +
         ": the exporter folded that weight together with other values "
         "(MobileBERT's LM head multiplies by cat([decoder.weight.t(), "
         "dense.weight]), its decoder tied to the word embeddings), and "
         "trained as a parameter of its own the tie would be lost (smp "
         "would train another model); export with smp.export (it keeps "
         "every parameter an initializer) or torch.onnx.export(..., "
         "dynamo=True, optimize=False), or pass --untie " +
         b.holder + " if the two are separate";
}

} // namespace smp::onnx_frontend
