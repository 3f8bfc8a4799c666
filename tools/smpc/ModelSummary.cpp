//===- ModelSummary.cpp - Human-readable summary of an smp module ---------===//

#include "ModelSummary.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"

#include <map>

using namespace mlir;

static std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

static std::string humanBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f %s", bytes, units[u]);
  return buf;
}

/// What the importer untied or tied (SharedInitializers.cpp).
static void printParamOrigins(ModuleOp module, llvm::raw_ostream &os) {
  auto origins = module->getAttrOfType<ArrayAttr>(
      smp::SmpDialect::kParamOriginsAttr);
  if (!origins)
    return;
  os << "shared initializers (see docs/bring-your-own-model.md):\n";
  for (auto entry : origins.getAsRange<DictionaryAttr>()) {
    auto name = entry.getAs<StringAttr>("name");
    auto from = entry.getAs<StringAttr>("from");
    auto kind = entry.getAs<StringAttr>("kind");
    auto why = entry.getAs<StringAttr>("why"); // buffers: why not trained
    if (!name || !from || !kind)
      continue;
    os << "  " << name.getValue();
    if (kind.getValue() == "alias")
      os << ": also PyTorch's " << from.getValue()
         << " (tied: one tensor; checkpoints export it under both names)\n";
    else if (kind.getValue() == "renamed") {
      os << ": PyTorch's " << from.getValue()
         << (entry.get("transposed") ? ", transposed" : "");
      if (auto shape = entry.getAs<DenseI64ArrayAttr>("shape")) {
        os << ", of shape [";
        llvm::interleaveComma(shape.asArrayRef(), os);
        os << "] in PyTorch";
      }
      os << " (" << (why ? why.getValue() : llvm::StringRef(""))
         << "; checkpoints "
         << "export it under that name)\n";
    } else if (kind.getValue() == "cloned")
      os << ": a copy of node '" << from.getValue() << "' ("
         << (why ? why.getValue() : llvm::StringRef("")) << ")\n";
    else if (kind.getValue() == "restored")
      os << ": a zero bias the exporter's optimiser removed, put back (its "
            "metadata names it)\n";
    else if (kind.getValue() == "buffer")
      os << ": a buffer, not trained ("
         << (why ? why.getValue() : llvm::StringRef("not a parameter"))
         << ")\n";
    else if (kind.getValue() == "identity")
      os << ": untied from '" << from.getValue()
         << "' (the exporter's Identity marker of a merged initializer)\n";
    else if (kind.getValue() == "merged-exact")
      os << ": untied from '" << from.getValue()
         << "' (the exporter merged equal tensors of separate PyTorch "
            "parameters; "
         << (why ? why.getValue()
                 : llvm::StringRef("its metadata names this one"))
         << ")\n";
    else if (kind.getValue() == "folded")
      os << ": rows of an embedding the exporter's optimiser gathered at "
            "constant positions and folded, trained as those rows\n";
    else if (kind.getValue() == "folded-rows")
      os << ": the distinct rows of '" << from.getValue()
         << "' (an embedding the exporter's optimiser gathered at constant "
            "positions and folded), trained as PyTorch trains the rows "
            "they were gathered from\n";
    else if (kind.getValue() == "tied-block") {
      auto source = entry.getAs<StringAttr>("source");
      os << ": the rows of '" << from.getValue() << "' beside "
         << (entry.get("transposed") ? "the transpose of '" : "a copy of '")
         << (source ? source.getValue() : llvm::StringRef("?"))
         << "' (a tied weight the exporter folded with them), trained as "
            "PyTorch trains them; --save-onnx writes '"
         << from.getValue() << "' back (--untie " << from.getValue()
         << " trains the fold apart)\n";
    } else if (kind.getValue() == "merged")
      os << ": untied from '" << from.getValue()
         << "' (one constant-valued initializer read by several nodes; "
            "--tie " << from.getValue() << " keeps it shared)\n";
    else
      os << ": tied to '" << from.getValue() << "'"
         << (entry.get("transposed") ? " (its transpose)" : " (a copy)")
         << " (--untie " << name.getValue() << " trains it apart)\n";
  }
}

void smp::printModelSummary(ModuleOp module, llvm::raw_ostream &os) {
  printParamOrigins(module, os);
  for (auto func : module.getOps<func::FuncOp>()) {
    os << "function @" << func.getSymName() << "\n";
    // Trained parameters (PyTorch's model.parameters()) apart from frozen
    // buffers (smp.frozen: a causal mask, a loss's class weights).
    int64_t params = 0, paramBytes = 0, numParams = 0;
    int64_t buffers = 0, bufferBytes = 0, numBuffers = 0;
    for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
      auto type = cast<RankedTensorType>(arg.getType());
      if (auto name = func.getArgAttrOfType<StringAttr>(i,
                                                        SmpDialect::kInputAttr))
        os << "  input  " << name.getValue() << ": " << typeString(type)
           << "\n";
      if (func.getArgAttr(i, SmpDialect::kParamAttr)) {
        bool frozen = func.getArgAttr(i, SmpDialect::kFrozenAttr) != nullptr;
        ++(frozen ? numBuffers : numParams);
        (frozen ? buffers : params) += type.getNumElements();
        (frozen ? bufferBytes : paramBytes) +=
            type.getNumElements() * ((type.getElementTypeBitWidth() + 7) / 8);
      }
    }
    for (unsigned i = 0; i < func.getNumResults(); ++i) {
      auto name = func.getResultAttrOfType<StringAttr>(
          i, SmpDialect::kOutputAttr);
      os << "  output " << (name ? name.getValue() : "?") << ": "
         << typeString(func.getResultTypes()[i]) << "\n";
    }
    os << "  parameters: " << numParams << " tensors, " << params
       << " values (" << humanBytes(static_cast<double>(paramBytes)) << ")\n";
    if (numBuffers)
      os << "  buffers (not trained): " << numBuffers << " tensors, " << buffers
         << " values (" << humanBytes(static_cast<double>(bufferBytes))
         << ")\n";
    std::map<std::string, int> histogram;
    int total = 0;
    func.walk([&](Operation *op) {
      if (op == func.getOperation() || isa<func::ReturnOp>(op))
        return;
      ++histogram[op->getName().getStringRef().str()];
      ++total;
    });
    os << "  ops: " << total << "\n";
    for (const auto &[name, count] : histogram)
      os << "    " << llvm::left_justify(name, 22) << count << "\n";
  }
}
