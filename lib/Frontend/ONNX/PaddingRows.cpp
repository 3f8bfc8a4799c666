//===- PaddingRows.cpp - nn.Embedding padding rows the file does not name -===//
//
// nn.Embedding(padding_idx=p) initialises row p to zeros and gives it no
// gradient, so it stays zero through training. The TorchScript exporter
// (torch.onnx.export's default) records neither: trained as an ordinary
// row, the lookup of the padding token updates it, and the model trains to
// other numbers than PyTorch's without a word. An embedding table (a float
// initializer read by a Gather on axis 0 at indices from the data) with
// exactly one all-zero row among non-zero rows is taken to have that row as
// its padding row, with a warning naming the flag that says otherwise
// (--no-padding-row). The smp.export sidecar and the dynamo exporter's
// metadata name the row; a row they give is not guessed.
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"
#include "TensorData.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <cstring>

namespace smp::onnx_frontend {

namespace {

/// Of a row-major [rows, cols] float tensor's bytes: the only all-zero row
/// when every other row has a non-zero element, or -1.
/// A row stops being read at its first non-zero element (most rows: the
/// first), so a scan costs about one element a row.
int64_t onlyZeroRow(llvm::StringRef bytes, int64_t rows, int64_t cols,
                    int64_t elementSize) {
  int64_t zero = -1;
  size_t rowBytes = static_cast<size_t>(cols * elementSize);
  // +0.0 and -0.0 (the sign bit) are both zero.
  uint64_t sign = uint64_t{1} << (8 * elementSize - 1);
  for (int64_t r = 0; r < rows; ++r) {
    const char *p = bytes.data() + static_cast<size_t>(r) * rowBytes;
    bool allZero = true;
    for (int64_t c = 0; c < cols && allZero; ++c) {
      uint64_t v = 0;
      std::memcpy(&v, p + c * elementSize, static_cast<size_t>(elementSize));
      allZero = (v & ~sign) == 0;
    }
    if (!allZero)
      continue;
    if (zero >= 0)
      return -1; // two zero rows: not nn.Embedding's padding row
    zero = r;
  }
  return rows > 1 ? zero : -1;
}

} // namespace

llvm::Error inferPaddingRows(const onnx::GraphProto &g,
                             llvm::StringRef modelDir, mlir::MLIRContext *ctx,
                             ImportOptions &options,
                             std::vector<std::string> &warnings) {
  llvm::StringMap<const onnx::TensorProto *> inits;
  for (const auto &t : g.initializer())
    inits[t.name()] = &t;
  // Values the data cannot change: initializers and Constant outputs.
  llvm::StringSet<> constant;
  for (const auto &t : g.initializer())
    constant.insert(t.name());
  for (const auto &n : g.node())
    if (n.op_type() == "Constant")
      for (const auto &o : n.output())
        constant.insert(o);
  llvm::StringSet<> seen;
  for (const auto &n : g.node()) {
    if (n.op_type() != "Gather" || n.input_size() < 2 ||
        constant.contains(n.input(1)) ||
        // The dynamo exporter's metadata names the row (ConvertShape.cpp).
        llvm::StringRef(nodeMetadata(n, "pkg.torch.onnx.fx_node"))
            .contains("aten.embedding"))
      continue;
    int64_t axis = 0;
    for (const auto &a : n.attribute())
      if (a.name() == "axis")
        axis = a.i();
    const std::string &name = n.input(0);
    auto it = inits.find(name);
    if (axis != 0 || it == inits.end() || !seen.insert(name).second ||
        options.paddingRows.count(name) ||
        llvm::is_contained(options.noPaddingRows, name))
      continue;
    const onnx::TensorProto &t = *it->second;
    int32_t type = t.data_type();
    if (t.dims_size() != 2 || (type != onnx::TensorProto::FLOAT &&
                               type != onnx::TensorProto::FLOAT16 &&
                               type != onnx::TensorProto::BFLOAT16 &&
                               type != onnx::TensorProto::DOUBLE))
      continue;
    auto checked = checkTensor(ctx, t, modelDir);
    if (!checked)
      return checked.takeError();
    // Raw data is scanned where it lies (the table can be the model's
    // largest tensor; resolveSharedInitializers already copied it once).
    std::string copy;
    if (!t.has_raw_data()) {
      auto bytes = readTensorBytes(t, *checked, modelDir);
      if (!bytes)
        return bytes.takeError();
      copy = std::move(*bytes);
    }
    int64_t row = onlyZeroRow(t.has_raw_data() ? t.raw_data() : copy, t.dims(0),
                              t.dims(1), elementSize(type));
    if (row < 0)
      continue;
    options.paddingRows[name] = row;
    warnings.push_back(
        "row " + std::to_string(row) + " of embedding '" + name +
        "' is all zeros, as nn.Embedding(padding_idx=" + std::to_string(row) +
        ") leaves it, and the file does not say (torch.onnx.export drops "
        "padding_idx): smp gives it no gradient, as PyTorch does; pass "
        "--no-padding-row " +
        name +
        " if it is an ordinary row "
        "(smp.export records the padding row)");
  }
  for (const std::string &name : options.noPaddingRows)
    if (!inits.count(name))
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--no-padding-row " + name +
                                         ": the model has no initializer '" +
                                         name + "'");
  return llvm::Error::success();
}

} // namespace smp::onnx_frontend
