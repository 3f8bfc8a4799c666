//===- GradientUtils.cpp - Helpers for the smp VJPs -----------------------===//

#include "smp/Dialect/Smp/Autodiff/GradientUtils.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace smp::autodiff {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

Value Grad::add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
Value Grad::sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
Value Grad::mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
Value Grad::div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
Value Grad::neg(Value x) { return NegOp::create(b, loc, x); }

Value Grad::scalar(Value like, double v) {
  auto type = RankedTensorType::get({}, typeOf(like).getElementType());
  auto ft = llvm::cast<FloatType>(type.getElementType());
  APFloat value(v);
  bool loses;
  value.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &loses);
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, value));
}

Value Grad::zeros(Type type) {
  auto t = llvm::cast<RankedTensorType>(type);
  auto ft = llvm::cast<FloatType>(t.getElementType());
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(t, APFloat::getZero(ft.getFloatSemantics())));
}

Value Grad::reshape(Value v, ArrayRef<int64_t> shape) {
  auto t = typeOf(v);
  if (t.getShape() == shape)
    return v;
  return ReshapeOp::create(b, loc, t.clone(shape), v);
}

Value Grad::sum(Value v, ArrayRef<int64_t> axes, bool keepdims) {
  if (axes.empty())
    return v;
  return ReduceSumOp::create(b, loc, v, b.getDenseI64ArrayAttr(axes),
                             keepdims);
}

Value Grad::unbroadcast(Value g, Type target) {
  auto gt = typeOf(g);
  auto tt = llvm::cast<RankedTensorType>(target);
  if (gt.getShape() == tt.getShape())
    return g;
  int64_t lead = gt.getRank() - tt.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < gt.getRank(); ++d)
    if (d < lead || (tt.getDimSize(d - lead) == 1 && gt.getDimSize(d) != 1))
      axes.push_back(d);
  return reshape(sum(g, axes, /*keepdims=*/true), tt.getShape());
}

Value Grad::expandTo(Value g, ArrayRef<int64_t> axes, Type target) {
  auto tt = llvm::cast<RankedTensorType>(target);
  SmallVector<int64_t> kept(tt.getShape());
  for (int64_t a : axes)
    kept[a < 0 ? a + tt.getRank() : a] = 1;
  Value r = reshape(g, kept);
  if (typeOf(r).getShape() == tt.getShape())
    return r;
  return ExpandOp::create(b, loc, tt.clone(typeOf(r).getElementType()), r);
}

Value Grad::where(Value cond, Value x, Value y) {
  return WhereOp::create(b, loc, cond, x, y);
}

Value Grad::cast(Value v, Type elementType) {
  auto t = typeOf(v);
  if (t.getElementType() == elementType)
    return v;
  return CastOp::create(b, loc, t.clone(elementType), v);
}

} // namespace smp::autodiff
