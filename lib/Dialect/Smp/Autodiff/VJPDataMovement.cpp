//===- VJPDataMovement.cpp - Gradients of data-movement smp ops -----------===//

#include "GradientUtils.h"

#include "smp/Dialect/Smp/IR/ShapeUtils.h"

using namespace mlir;

namespace smp::autodiff {

#define VJP(OP)                                                                \
  LogicalResult vjp(OP op, OpBuilder &b, ArrayRef<Value> gy,                   \
                    ArrayRef<bool> need, SmallVectorImpl<Value> &gx)

VJP(ReshapeOp) {
  gx[0] = Grad{b, op.getLoc()}.reshape(gy[0], typeOf(op.getInput()).getShape());
  return success();
}

VJP(TransposeOp) {
  ArrayRef<int64_t> perm = op.getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  gx[0] = TransposeOp::create(b, op.getLoc(), gy[0],
                              b.getDenseI64ArrayAttr(inverse));
  return success();
}

VJP(ExpandOp) {
  gx[0] = Grad{b, op.getLoc()}.unbroadcast(gy[0], op.getInput().getType());
  return success();
}

VJP(SliceOp) {
  gx[0] = SliceGradOp::create(b, op.getLoc(), op.getInput().getType(), gy[0],
                              op.getStartsAttr(), op.getLimitsAttr(),
                              op.getStepsAttr());
  return success();
}

VJP(ConcatOp) {
  auto t = typeOf(op.getResult());
  int64_t axis = *normalizeAxis(static_cast<int64_t>(op.getAxis()), t.getRank());
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    auto it = typeOf(input);
    int64_t size = it.getDimSize(axis);
    if (need[i]) {
      SmallVector<int64_t> starts(t.getRank(), 0), limits(t.getShape()),
          steps(t.getRank(), 1);
      starts[axis] = offset;
      limits[axis] = offset + size;
      gx[i] = SliceOp::create(b, op.getLoc(), gy[0],
                              b.getDenseI64ArrayAttr(starts),
                              b.getDenseI64ArrayAttr(limits),
                              b.getDenseI64ArrayAttr(steps));
    }
    offset += size;
  }
  return success();
}

VJP(SplitOp) {
  Grad G{b, op.getLoc()};
  SmallVector<Value> parts;
  for (auto [result, g] : llvm::zip(op.getResults(), gy))
    parts.push_back(g ? g : G.zeros(result.getType()));
  gx[0] = ConcatOp::create(b, op.getLoc(), parts, op.getAxisAttr());
  return success();
}

VJP(GatherOp) {
  if (!need[0])
    return success();
  Value g = gy[0];
  if (auto pad = op.getPaddingIdxAttr()) {
    // nn.Embedding(padding_idx=p): positions reading row p add nothing.
    Grad G{b, op.getLoc()};
    auto ids = typeOf(op.getIndices());
    auto padType = RankedTensorType::get({}, ids.getElementType());
    Value p = ConstantOp::create(
        b, op.getLoc(),
        DenseElementsAttr::get(
            padType, APInt(ids.getElementTypeBitWidth(), pad.getInt(), true)));
    Value isPad = EqualOp::create(
        b, op.getLoc(), ids.clone(b.getI1Type()), op.getIndices(), p);
    SmallVector<int64_t> shape(ids.getShape());
    shape.append(typeOf(g).getRank() - ids.getRank(), 1);
    isPad = ReshapeOp::create(
        b, op.getLoc(), RankedTensorType::get(shape, b.getI1Type()), isPad);
    g = G.where(isPad, G.scalar(g, 0.0), g);
  }
  gx[0] = GatherGradOp::create(b, op.getLoc(), op.getData().getType(),
                               op.getIndices(), g, op.getAxisAttr());
  return success();
}

VJP(GatherNdOp) {
  if (need[0])
    gx[0] = GatherNdGradOp::create(b, op.getLoc(), op.getData().getType(),
                                   op.getIndices(), gy[0],
                                   op.getBatchDimsAttr());
  return success();
}

VJP(GatherElementsOp) {
  if (need[0])
    gx[0] = GatherElementsGradOp::create(b, op.getLoc(),
                                         op.getData().getType(),
                                         op.getIndices(), gy[0],
                                         op.getAxisAttr());
  return success();
}

VJP(TriluOp) {
  gx[0] = TriluOp::create(b, op.getLoc(), gy[0], op.getUpperAttr(),
                          op.getKAttr());
  return success();
}

} // namespace smp::autodiff
