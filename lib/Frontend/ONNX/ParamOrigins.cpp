//===- ParamOrigins.cpp - What the importer did to the file's parameters ===//
//
// recordParamOrigins: the origins SharedInitializers.cpp and its steps found
// (untied copies, frozen buffers, restored biases, folded rows), recorded on
// the module for the artifact (checkpoint names, --save-onnx, smpc summary)
// and as argument attributes (smp.frozen, smp.init_from, ...).
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace smp::onnx_frontend {

void recordParamOrigins(ModuleOp module,
                        const std::vector<ParamOrigin> &origins) {
  if (origins.empty())
    return;
  MLIRContext *ctx = module.getContext();
  Builder b(ctx);
  llvm::StringMap<std::string> initFrom;
  llvm::StringSet<> buffers, restored;
  llvm::StringMap<const std::string *> initValue;
  SmallVector<Attribute> list;
  for (const ParamOrigin &o : origins) {
    if (o.kind == "buffer") {
      buffers.insert(o.name);
      if (o.from != o.name) // a copy of a buffer (Identity marker)
        initFrom[o.name] = o.from;
    } else if (o.kind == "restored")
      restored.insert(o.name);
    else if (o.kind == "folded-rows" || o.kind == "tied-block")
      initValue[o.name] = &o.initBytes;
    else if (o.kind != "tied" && o.kind != "folded" && o.kind != "cloned" &&
             o.kind != "renamed" &&
             o.kind != "alias") // a copy: its values are `from`'s
      initFrom[o.name] = o.from;
    SmallVector<NamedAttribute> entry{
        b.getNamedAttr("name", b.getStringAttr(o.name)),
        b.getNamedAttr("from", b.getStringAttr(o.from)),
        b.getNamedAttr("kind", b.getStringAttr(o.kind))};
    if (o.transposed)
      entry.push_back(b.getNamedAttr("transposed", b.getUnitAttr()));
    if (!o.torchShape.empty())
      entry.push_back(
          b.getNamedAttr("shape", b.getDenseI64ArrayAttr(o.torchShape)));
    if (!o.why.empty())
      entry.push_back(b.getNamedAttr("why", b.getStringAttr(o.why)));
    if (!o.source.empty())
      entry.push_back(b.getNamedAttr("source", b.getStringAttr(o.source)));
    if (!o.uses.empty()) {
      SmallVector<int64_t> flat;
      for (auto [node, k] : o.uses)
        flat.append({node, k});
      entry.push_back(b.getNamedAttr("uses", b.getDenseI64ArrayAttr(flat)));
    }
    list.push_back(b.getDictionaryAttr(entry));
  }
  module->setAttr(SmpDialect::kParamOriginsAttr, b.getArrayAttr(list));
  for (auto f : module.getOps<func::FuncOp>())
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto p = f.getArgAttrOfType<StringAttr>(i, SmpDialect::kParamAttr)) {
        if (auto it = initFrom.find(p.getValue()); it != initFrom.end())
          f.setArgAttr(i, SmpDialect::kInitFromAttr,
                       b.getStringAttr(it->second));
        if (buffers.count(p.getValue()))
          f.setArgAttr(i, SmpDialect::kFrozenAttr, b.getUnitAttr());
        if (restored.count(p.getValue()))
          f.setArgAttr(i, SmpDialect::kInitZeroAttr, b.getUnitAttr());
        if (auto it = initValue.find(p.getValue()); it != initValue.end())
          if (auto type = dyn_cast<RankedTensorType>(f.getArgumentTypes()[i]))
            f.setArgAttr(i, SmpDialect::kInitValueAttr,
                         DenseElementsAttr::getFromRawBuffer(
                             type, llvm::ArrayRef<char>(it->second->data(),
                                                        it->second->size())));
      }
}

} // namespace smp::onnx_frontend
