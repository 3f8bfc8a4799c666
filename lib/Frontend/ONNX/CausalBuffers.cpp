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
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/base/Tensor.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <optional>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// The values of a causal tensor of `type` held in `bytes`: the one on and
/// below the diagonal and the one above (<= -1e30 as -inf), when every
/// trailing [S, S] slice is such.
std::optional<std::pair<double, double>>
causalPattern(RankedTensorType type, std::string &bytes) {
  auto dtype = smp::baseDType(type.getElementType());
  int64_t s = type.getShape().back();
  if (!dtype)
    return std::nullopt;
  smp::base::TensorRef t{bytes.data(), *dtype, type.getShape().vec()};
  std::optional<double> below, above;
  for (int64_t k = 0, n = t.numel(); k < n; ++k) {
    double x = smp::base::elementAsDouble(t, k);
    if (x <= -1e30)
      x = -INFINITY;
    int64_t i = (k / s) % s, j = k % s;
    std::optional<double> &slot = j <= i ? below : above;
    if (!slot)
      slot = x;
    if (!(*slot == x)) // NaN fails too
      return std::nullopt;
  }
  if (!below || !above || *below == *above)
    return std::nullopt;
  return std::pair{*below, *above};
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
                     b.getDenseF64ArrayAttr({p->first, p->second}));
    }
  }
  return llvm::Error::success();
}

} // namespace smp::onnx_frontend
