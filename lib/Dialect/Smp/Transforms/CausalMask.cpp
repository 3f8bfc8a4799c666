//===- CausalMask.cpp - Whether a mask value is causal --------------------===//

#include "CausalMask.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"

#include <cmath>

using namespace mlir;

namespace smp {

namespace {

/// The trailing [S, S] of a ranked type, S >= 2; 0 otherwise.
int64_t squareTail(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  if (!rt || rt.getRank() < 2 || !rt.hasStaticShape())
    return 0;
  int64_t s = rt.getDimSize(rt.getRank() - 1);
  return s >= 2 && rt.getDimSize(rt.getRank() - 2) == s ? s : 0;
}

/// Whether `a` and `b` end in the same [S, S].
bool sameTail(Value a, Value b) {
  int64_t s = squareTail(a.getType());
  return s != 0 && s == squareTail(b.getType());
}

/// A constant's causal values, checked element by element.
std::optional<CausalValues> constantValues(DenseElementsAttr dense) {
  int64_t s = squareTail(dense.getType());
  if (s == 0 || dense.isSplat())
    return std::nullopt;
  int64_t n = dense.getNumElements();
  if (dense.getElementType().isInteger(1)) {
    auto values = dense.getValues<bool>();
    return classifyCausal(n, s, [&](int64_t k) { return values[k] ? 1.0 : 0.0; });
  }
  if (!isa<FloatType>(dense.getElementType()))
    return std::nullopt;
  auto values = dense.getValues<APFloat>();
  return classifyCausal(
      n, s, [&](int64_t k) { return values[k].convertToDouble(); });
}

/// A splat constant's value, booleans as 0 and 1.
std::optional<double> splatValue(Value v) {
  DenseElementsAttr attr;
  if (v && matchPattern(v, m_Constant(&attr)) && attr.isSplat() &&
      attr.getElementType().isInteger(1))
    return attr.getSplatValue<bool>() ? 1.0 : 0.0;
  return getSplatConstant(v);
}

/// A frozen argument's values, as the importer recorded them.
std::optional<CausalValues> argumentValues(BlockArgument arg) {
  auto f = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!f || !squareTail(arg.getType()))
    return std::nullopt;
  auto values = f.getArgAttrOfType<DenseF64ArrayAttr>(
      arg.getArgNumber(), SmpDialect::kCausalValuesAttr);
  if (!values || values.size() != 2 ||
      !f.getArgAttr(arg.getArgNumber(), SmpDialect::kFrozenAttr))
    return std::nullopt;
  return CausalValues{normalizeCausalValue(values[0]),
                      normalizeCausalValue(values[1])};
}

/// A trilu of a splat: upper with k = 1 keeps j > i, lower with k = 0 keeps
/// j <= i; the rest is zero.
std::optional<CausalValues> triluValues(TriluOp t) {
  auto c = splatValue(t.getInput());
  if (!c || *c == 0 || !squareTail(t.getType()))
    return std::nullopt;
  if (t.getUpper() && t.getK() == 1)
    return CausalValues{0, normalizeCausalValue(*c)};
  if (!t.getUpper() && t.getK() == 0)
    return CausalValues{normalizeCausalValue(*c), 0};
  return std::nullopt;
}

/// Whether a slice keeps the top-left [S', S'] of its input's trailing
/// [S, S] (any leading dims): starts 0 and steps 1 on the last two.
bool keepsTopLeft(SliceOp slice) {
  auto starts = slice.getStarts(), steps = slice.getSteps();
  size_t r = starts.size();
  return r >= 2 && squareTail(slice.getType()) != 0 && starts[r - 1] == 0 &&
         starts[r - 2] == 0 && steps[r - 1] == 1 && steps[r - 2] == 1 &&
         squareTail(slice.getInput().getType()) != 0;
}

} // namespace

std::optional<CausalValues> causalValues(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return argumentValues(arg);
  Operation *def = v.getDefiningOp();
  if (!def || !squareTail(v.getType()))
    return std::nullopt;
  if (auto c = dyn_cast<ConstantOp>(def)) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    return dense ? constantValues(dense) : std::nullopt;
  }
  if (auto t = dyn_cast<TriluOp>(def))
    return triluValues(t);
  // Ops that move the trailing [S, S] unchanged.
  if (isa<ReshapeOp, ExpandOp>(def) && sameTail(def->getOperand(0), v))
    return causalValues(def->getOperand(0));
  if (auto slice = dyn_cast<SliceOp>(def))
    return keepsTopLeft(slice) ? causalValues(slice.getInput()) : std::nullopt;
  auto values = [&](unsigned i) -> std::optional<CausalValues> {
    return causalValues(def->getOperand(i));
  };
  if (isa<NotOp>(def)) {
    auto x = values(0);
    if (!x)
      return std::nullopt;
    return CausalValues{x->below == 0 ? 1.0 : 0.0, x->above == 0 ? 1.0 : 0.0};
  }
  if (auto cast = dyn_cast<CastOp>(def)) {
    auto x = values(0);
    Type to = getElementTypeOrSelf(v.getType());
    if (!x || (!isa<FloatType>(to) && !to.isInteger(1)))
      return std::nullopt;
    if (to.isInteger(1))
      return CausalValues{x->below != 0 ? 1.0 : 0.0, x->above != 0 ? 1.0 : 0.0};
    return x; // float to float: -inf stays -inf, 0 and 1 stay
  }
  if (auto eq = dyn_cast<EqualOp>(def)) {
    for (auto [m, other] : {std::pair{0u, 1u}, {1u, 0u}}) {
      auto c = splatValue(def->getOperand(other));
      auto x = values(m);
      if (c && x)
        return CausalValues{x->below == *c ? 1.0 : 0.0,
                            x->above == *c ? 1.0 : 0.0};
    }
    return std::nullopt;
  }
  if (auto w = dyn_cast<WhereOp>(def)) {
    auto cond = causalValues(w.getCondition());
    auto a = splatValue(w.getLhs()), b = splatValue(w.getRhs());
    if (!cond || !a || !b)
      return std::nullopt;
    return CausalValues{normalizeCausalValue(cond->below != 0 ? *a : *b),
                        normalizeCausalValue(cond->above != 0 ? *a : *b)};
  }
  return std::nullopt;
}

} // namespace smp
