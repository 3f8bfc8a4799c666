//===- VJPLinalg.cpp - Gradients of matmul, reductions, norms, losses -----===//

#include "GradientUtils.h"

#include "smp/Dialect/Smp/IR/ShapeUtils.h"

using namespace mlir;

namespace smp::autodiff {

#define VJP(OP)                                                                \
  LogicalResult vjp(OP op, OpBuilder &b, ArrayRef<Value> gy,                   \
                    ArrayRef<bool> need, SmallVectorImpl<Value> &gx)

/// C = op(A) op(B) with op a transpose of the last two dims when flagged:
///   dA = op_a(...) built so that dA has A's layout, same for dB.
VJP(MatMulOp) {
  Grad G{b, op.getLoc()};
  Location loc = op.getLoc();
  Value a = op.getLhs(), c = op.getRhs(), g = gy[0];
  bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
  auto at = typeOf(a), ct = typeOf(c);
  bool pa = at.getRank() == 1, pc = ct.getRank() == 1;
  if ((pa && ta) || (pc && tb))
    return op.emitOpError("gradient of a transposed rank-1 operand");
  // Promote rank-1 operands as matmul does, and give the gradient the
  // dropped dims back.
  Value A = pa ? G.reshape(a, {1, at.getDimSize(0)}) : a;
  Value C = pc ? G.reshape(c, {ct.getDimSize(0), 1}) : c;
  SmallVector<int64_t> gShape(typeOf(g).getShape());
  if (pa)
    gShape.insert(gShape.end() - (pc ? 0 : 1), 1);
  if (pc)
    gShape.push_back(1);
  Value Gm = G.reshape(g, gShape);
  auto mm = [&](Value x, Value y, bool tx, bool ty) -> Value {
    return MatMulOp::create(b, loc, x, y, tx, ty);
  };
  if (need[0]) {
    Value dA = ta ? (tb ? mm(C, Gm, true, true) : mm(C, Gm, false, true))
                  : (tb ? mm(Gm, C, false, false) : mm(Gm, C, false, true));
    dA = G.unbroadcast(dA, A.getType());
    gx[0] = G.reshape(dA, at.getShape());
  }
  if (need[1]) {
    // A weight (a matrix) applied to a batch of activations, A [..., T, K]
    // and G [..., T, N] with the same leading dims: one product over the
    // flattened rows, [rows, K]^T [rows, N], instead of a batched product
    // [..., K, N] summed over the batch (no batch-sized temporary, no
    // reduction pass).
    auto aT = typeOf(A), gT = typeOf(Gm);
    int64_t rank = aT.getRank();
    if (!ta && typeOf(C).getRank() == 2 && rank >= 3 &&
        gT.getRank() == rank &&
        aT.getShape().drop_back() == gT.getShape().drop_back()) {
      int64_t rows = 1;
      for (int64_t d : aT.getShape().drop_back())
        rows *= d;
      Value A2 = G.reshape(A, {rows, aT.getDimSize(rank - 1)});
      Value G2 = G.reshape(Gm, {rows, gT.getDimSize(rank - 1)});
      Value dC = tb ? mm(G2, A2, true, false) : mm(A2, G2, true, false);
      gx[1] = G.reshape(dC, ct.getShape());
      return success();
    }
    Value dC = tb ? (ta ? mm(Gm, A, true, true) : mm(Gm, A, true, false))
                  : (ta ? mm(A, Gm, false, false) : mm(A, Gm, true, false));
    dC = G.unbroadcast(dC, C.getType());
    gx[1] = G.reshape(dC, ct.getShape());
  }
  return success();
}

static SmallVector<int64_t> normalizedAxes(ArrayRef<int64_t> axes,
                                          int64_t rank) {
  SmallVector<int64_t> out;
  for (int64_t a : axes)
    out.push_back(a < 0 ? a + rank : a);
  return out;
}

VJP(ReduceSumOp) {
  Grad G{b, op.getLoc()};
  auto t = typeOf(op.getInput());
  if (!isa<FloatType>(t.getElementType()))
    return success();
  gx[0] = G.expandTo(gy[0], normalizedAxes(op.getAxes(), t.getRank()), t);
  return success();
}

VJP(ReduceMeanOp) {
  Grad G{b, op.getLoc()};
  auto t = typeOf(op.getInput());
  auto axes = normalizedAxes(op.getAxes(), t.getRank());
  // In double: the product of the reduced dims cannot overflow (it did in
  // int64 for shapes holding a 0 dim beside huge ones).
  double count = 1;
  for (int64_t a : axes)
    count *= double(t.getDimSize(a));
  Value scaled = G.mul(gy[0], G.scalar(gy[0], 1.0 / count));
  gx[0] = G.expandTo(scaled, axes, t);
  return success();
}

/// The gradient goes to the maxima, split evenly between ties (torch.amax).
VJP(ReduceMaxOp) {
  Grad G{b, op.getLoc()};
  Location loc = op.getLoc();
  Value x = op.getInput();
  auto t = typeOf(x);
  if (!isa<FloatType>(t.getElementType()))
    return success();
  auto axes = normalizedAxes(op.getAxes(), t.getRank());
  Value y = G.expandTo(op.getResult(), axes, t);
  Value hit = G.cast(EqualOp::create(b, loc, x, y), t.getElementType());
  Value count = G.sum(hit, axes, /*keepdims=*/true);
  Value share = G.div(hit, count);
  gx[0] = G.mul(G.expandTo(gy[0], axes, t), share);
  return success();
}

VJP(SoftmaxOp) { // y (g - sum(g y))
  Grad G{b, op.getLoc()};
  Value y = op.getResult();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  Value dot = G.sum(G.mul(gy[0], y), {axis < 0 ? axis + typeOf(y).getRank() : axis},
                    /*keepdims=*/true);
  gx[0] = G.mul(y, G.sub(gy[0], dot));
  return success();
}

VJP(LogSoftmaxOp) { // g - exp(y) sum(g)
  Grad G{b, op.getLoc()};
  Value y = op.getResult();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  Value total = G.sum(gy[0], {axis < 0 ? axis + typeOf(y).getRank() : axis},
                      /*keepdims=*/true);
  gx[0] = G.sub(gy[0], G.mul(ExpOp::create(b, op.getLoc(), y), total));
  return success();
}

/// y_i = sum over j <= i of x_j, so dx_j = sum over i >= j of dy_i: the
/// cumulative sum of the gradient in the other direction (same exclusive).
VJP(CumSumOp) {
  gx[0] = CumSumOp::create(b, op.getLoc(), gy[0], op.getAxisAttr(),
                           op.getExclusiveAttr(),
                           b.getBoolAttr(!op.getReverse()));
  return success();
}

VJP(LayerNormOp) {
  auto grads = LayerNormGradOp::create(b, op.getLoc(), op.getInput(),
                                       op.getScale(), gy[0], op.getAxisAttr(),
                                       op.getEpsilonAttr());
  gx[0] = grads.getInputGrad();
  gx[1] = grads.getScaleGrad();
  if (op.getBias()) {
    Grad G{b, op.getLoc()};
    gx[2] = G.reshape(grads.getBiasGrad(), typeOf(op.getBias()).getShape());
  }
  return success();
}

VJP(RmsNormOp) {
  auto grads = RmsNormGradOp::create(b, op.getLoc(), op.getInput(),
                                     op.getScale(), gy[0],
                                     op.getEpsilonAttr());
  gx[0] = grads.getInputGrad();
  gx[1] = grads.getScaleGrad();
  return success();
}

/// Batch norm: y = (x - mean) * inv * scale + bias, inv = rsqrt(var + eps),
/// per channel (dim 1). In inference the statistics are fixed; in training
/// they are the batch's (computed from x by ops before this one), so their
/// gradients carry the rest of the input's gradient:
/// d mean = -scale * inv * sum(g), d var = -scale * inv^2 / 2 * sum(g xhat).
VJP(BatchNormOp) {
  Grad G{b, op.getLoc()};
  Value x = op.getInput(), g = gy[0];
  auto t = typeOf(x);
  SmallVector<int64_t> chan(t.getRank(), 1);
  chan[1] = t.getDimSize(1);
  SmallVector<int64_t> others;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (d != 1)
      others.push_back(d);
  ArrayRef<int64_t> perChannel = typeOf(op.getVariance()).getShape();
  Value eps = G.scalar(x, op.getEpsilon().convertToDouble());
  Value invC = RsqrtOp::create(b, op.getLoc(), G.add(op.getVariance(), eps));
  Value inv = G.reshape(invC, chan);
  Value xhat;
  if (need[1] || need[4])
    xhat = G.mul(G.sub(x, G.reshape(op.getMean(), chan)), inv);
  if (need[0])
    gx[0] = G.mul(g, G.mul(G.reshape(op.getScale(), chan), inv));
  Value gxhat; // sum(g * xhat) per channel
  if (need[1] || need[4])
    gxhat = G.sum(G.mul(g, xhat), others, /*keepdims=*/false);
  Value gsum; // sum(g) per channel
  if (need[2] || need[3])
    gsum = G.sum(g, others, /*keepdims=*/false);
  if (need[1])
    gx[1] = G.reshape(gxhat, typeOf(op.getScale()).getShape());
  if (need[2])
    gx[2] = G.reshape(gsum, typeOf(op.getBias()).getShape());
  Value scaleInv;
  if (need[3] || need[4])
    scaleInv = G.mul(G.reshape(op.getScale(), perChannel), invC);
  if (need[3])
    gx[3] = G.reshape(
        NegOp::create(b, op.getLoc(),
                      G.mul(scaleInv, G.reshape(gsum, perChannel))),
        typeOf(op.getMean()).getShape());
  if (need[4])
    gx[4] = G.mul(G.mul(scaleInv, G.mul(invC, G.scalar(invC, -0.5))),
                  G.reshape(gxhat, perChannel));
  return success();
}

VJP(CrossEntropyOp) {
  gx[0] = CrossEntropyGradOp::create(
      b, op.getLoc(), op.getLogits(), op.getLabels(), op.getWeights(), gy[0],
      op.getIgnoreIndexAttr(), op.getReductionAttr());
  return success();
}

VJP(ConvOp) {
  auto grads = ConvGradOp::create(
      b, op.getLoc(), op.getInput().getType(), op.getWeight().getType(),
      op.getInput(), op.getWeight(), gy[0], op.getStridesAttr(),
      op.getPadsAttr(), op.getDilationsAttr(), op.getGroupAttr());
  gx[0] = grads.getInputGrad();
  gx[1] = grads.getWeightGrad();
  if (op.getBias() && need[2]) { // sum over N and the spatial dims
    Grad G{b, op.getLoc()};
    SmallVector<int64_t> axes{0};
    for (int64_t d = 2; d < typeOf(gy[0]).getRank(); ++d)
      axes.push_back(d);
    gx[2] = G.sum(gy[0], axes, /*keepdims=*/false);
  }
  return success();
}

template <typename PoolOp>
static LogicalResult vjpPool(PoolOp op, StringRef mode, OpBuilder &b,
                             ArrayRef<Value> gy, SmallVectorImpl<Value> &gx) {
  gx[0] = PoolGradOp::create(
      b, op.getLoc(), op.getInput().getType(), op.getInput(), gy[0],
      b.getStringAttr(mode), op.getKernelAttr(), op.getStridesAttr(),
      op.getPadsAttr(), op.getDilationsAttr(), op.getCeilModeAttr(),
      op.getCountIncludePadAttr());
  return success();
}
VJP(MaxPoolOp) { return vjpPool(op, "max", b, gy, gx); }
VJP(AvgPoolOp) { return vjpPool(op, "avg", b, gy, gx); }

} // namespace smp::autodiff
