//===- CausalBuffers.cpp - Frozen buffers that hold a causal mask ---------===//
//
// Exporters fold a model's attention mask into an initializer: the legacy
// export's `tril` buffer (1 on and below the diagonal, 0 above), the dynamo
// exporter's folded causal mask of Hugging Face models (`val_160`: 0 and
// finfo.min, [B, 1, S, S]), a static export's bool mask. Such an
// initializer becomes a frozen argument whose values the IR does not hold;
// this file reads its bytes and, when every trailing [S, S] slice holds one
// value on and below the diagonal and another above it, records the two as
// smp.causal_values, so that smp-raise-attention can give smp.attention
// `causal = true` instead of the mask (CausalMask.cpp). A padding mask (a
// masked key column) breaks the pattern, and the mask stays an operand.
//
//===----------------------------------------------------------------------===//

#include "SharedInitializers.h"
#include "TensorData.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/BaseTypes.h"
#include "smp/Dialect/Smp/IR/CausalValues.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/base/Tensor.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// The causal values of a tensor of `type` held in `bytes`.
std::optional<CausalValues> causalPattern(RankedTensorType type,
                                          std::string &bytes) {
  auto dtype = smp::baseDType(type.getElementType());
  if (!dtype)
    return std::nullopt;
  smp::base::TensorRef t{bytes.data(), *dtype, type.getShape().vec()};
  return classifyCausal(t.numel(), type.getShape().back(), [&](int64_t k) {
    return smp::base::elementAsDouble(t, k);
  });
}

} // namespace

llvm::Error recordCausalBuffers(ModuleOp module,
                                const onnx::GraphProto &graph,
                                llvm::StringRef modelDir) {
  llvm::StringMap<const onnx::TensorProto *> inits;
  for (const auto &init : graph.initializer())
    inits[init.name()] = &init;
  Builder b(module.getContext());
  for (auto f : module.getOps<func::FuncOp>()) {
    for (unsigned a = 0; a < f.getNumArguments(); ++a) {
      auto type = dyn_cast<RankedTensorType>(f.getArgumentTypes()[a]);
      auto param = f.getArgAttrOfType<StringAttr>(a, SmpDialect::kParamAttr);
      if (!param || !f.getArgAttr(a, SmpDialect::kFrozenAttr) || !type ||
          type.getRank() < 2 || !type.hasStaticShape() ||
          type.getShape().back() < 2 ||
          type.getShape().back() != type.getShape().drop_back().back())
        continue;
      // A copy of a buffer (an Identity) starts from its source.
      auto from = f.getArgAttrOfType<StringAttr>(a, SmpDialect::kInitFromAttr);
      auto it = inits.find(from ? from.getValue() : param.getValue());
      if (it == inits.end())
        continue;
      auto checked = checkTensor(module.getContext(), *it->second, modelDir);
      if (!checked)
        return checked.takeError();
      if (*checked != type)
        continue;
      auto bytes = readTensorBytes(*it->second, type, modelDir);
      if (!bytes)
        return bytes.takeError();
      if (auto p = causalPattern(type, *bytes))
        f.setArgAttr(a, SmpDialect::kCausalValuesAttr,
                     b.getDenseF64ArrayAttr({p->below, p->above}));
    }
  }
  return llvm::Error::success();
}

} // namespace smp::onnx_frontend
