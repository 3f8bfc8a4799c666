//===- Linalg.cpp - Op models of matmul, reductions, softmax ----------------===//
//
// matmul, reduce_sum/mean/max, softmax, log_softmax and cumsum: gradients,
// costs and sharding rules.
//
//===----------------------------------------------------------------------===//

#include "OpModelSupport.h"

#include "smp/Dialect/Smp/IR/ShapeUtils.h"

using namespace mlir;
using namespace smp::autodiff;

namespace smp {

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// C = op(A) op(B) with op a transpose of the last two dims when flagged:
///   dA = op_a(...) built so that dA has A's layout, same for dB.
SMP_VJP(MatMulOp) {
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

SMP_VJP(ReduceSumOp) {
  Grad G{b, op.getLoc()};
  auto t = typeOf(op.getInput());
  if (!isa<FloatType>(t.getElementType()))
    return success();
  gx[0] = G.expandTo(gy[0], normalizedAxes(op.getAxes(), t.getRank()), t);
  return success();
}

SMP_VJP(ReduceMeanOp) {
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
SMP_VJP(ReduceMaxOp) {
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

SMP_VJP(SoftmaxOp) { // y (g - sum(g y))
  Grad G{b, op.getLoc()};
  Value y = op.getResult();
  int64_t axis = static_cast<int64_t>(op.getAxis());
  Value dot = G.sum(G.mul(gy[0], y), {axis < 0 ? axis + typeOf(y).getRank() : axis},
                    /*keepdims=*/true);
  gx[0] = G.mul(y, G.sub(gy[0], dot));
  return success();
}

SMP_VJP(LogSoftmaxOp) { // g - exp(y) sum(g)
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
SMP_VJP(CumSumOp) {
  gx[0] = CumSumOp::create(b, op.getLoc(), gy[0], op.getAxisAttr(),
                           op.getExclusiveAttr(),
                           b.getBoolAttr(!op.getReverse()));
  return success();
}

//===----------------------------------------------------------------------===//
// Costs
//===----------------------------------------------------------------------===//

namespace {

/// A product's multiply-adds (its first result's elements times K), plus
/// `PerElement` FLOPs per result element for its epilogue (matmul_bias: the
/// bias's add; matmul_add: the addend's; matmul_bias_add: the bias's and
/// the addend's; the GELU
/// epilogues: the GELU or its derivative, the bias and the bias gradient's
/// add); streaming() counts every operand's and result's bytes.
template <typename MatMulLikeOp, int PerElement>
OpCost matmulCost(Operation *op) {
  auto mm = cast<MatMulLikeOp>(op);
  OpCost c = streaming(mm, 0);
  auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
  int64_t k = lhs.getRank() == 1
                  ? lhs.getDimSize(0)
                  : lhs.getDimSize(mm.getTransposeLhs() ? lhs.getRank() - 2
                                                        : lhs.getRank() - 1);
  double elements = numel(op->getResult(0));
  c.flops = 2.0 * elements * static_cast<double>(k) + PerElement * elements;
  c.matrix = true;
  return c;
}

/// matmul_bias_grad: lhs^T rhs's multiply-adds and the bias sum's adds.
OpCost matmulBiasGradCost(Operation *op) {
  auto mm = cast<MatMulBiasGradOp>(op);
  OpCost c = streaming(mm, 0);
  c.flops = 2.0 * numel(mm.getResult()) *
                static_cast<double>(shapeOf(mm.getLhs())[0]) +
            numel(mm.getLhs());
  c.matrix = true;
  return c;
}

/// One addition (or comparison) per input element.
OpCost reduceCost(Operation *op) {
  OpCost c = streaming(op, 0);
  c.flops = numel(op->getOperand(0));
  return c;
}

/// A multiply and an add per input element.
OpCost sumSquaresCost(Operation *op) {
  OpCost c = streaming(op, 0);
  for (Value v : op->getOperands())
    c.flops += 2 * numel(v);
  return c;
}

//===----------------------------------------------------------------------===//
// Sharding rules
//===----------------------------------------------------------------------===//

/// Column-parallel (activation x weight, the result split by the weight's
/// columns: the activation enters the region whole) or a product of two
/// activations split along a batch dimension both span (attention's heads).
struct MatMulTpRule : public TpRule<MatMulTpRule, MatMulOp> {
  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult result, TpShard s, int64_t tp,
                      function_ref<bool(Value)> isWeight,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    auto mm = cast<MatMulOp>(op);
    int64_t rank = shapeOf(result).size();
    bool lhsW = isWeight(mm.getLhs()), rhsW = isWeight(mm.getRhs());
    if (rhsW && !lhsW) {
      if (s.dim != rank - 1 || shapeOf(mm.getRhs()).size() != 2)
        return failure();
      layouts.push_back(TpOperandLayout::enter());
      layouts.push_back(TpOperandLayout::splitWeight(
          {mm.getTransposeRhs() ? 0 : 1, s.blocks}));
      return success();
    }
    if (lhsW || rhsW || s.dim >= rank - 2 || s.blocks != 1)
      return failure();
    for (Value o : {mm.getLhs(), mm.getRhs()}) {
      int64_t ad = s.dim - (rank - static_cast<int64_t>(shapeOf(o).size()));
      if (ad < 0 || shapeOf(o)[ad] != shapeOf(result)[s.dim])
        return failure();
      layouts.push_back(TpOperandLayout::split({ad, 1}));
    }
    return success();
  }
};

/// Rows normalised along `axis`: split along any other dimension.
template <typename OpT>
struct SoftmaxTpRule : public TpRule<SoftmaxTpRule<OpT>, OpT> {
  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult result, TpShard s, int64_t tp,
                      function_ref<bool(Value)>,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    int64_t axis = static_cast<int64_t>(cast<OpT>(op).getAxis());
    if (axisIndex(axis, shapeOf(result).size()) == s.dim)
      return failure();
    layouts.push_back(TpOperandLayout::split(s));
    return success();
  }
};

} // namespace

void registerLinalgOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, MatMulOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp,
           SoftmaxOp, LogSoftmaxOp, CumSumOp>(ctx);
    attach<CostFn<matmulCost<MatMulOp, 0>>::Model, MatMulOp>(ctx);
    attach<CostFn<matmulCost<MatMulBiasOp, 1>>::Model, MatMulBiasOp>(ctx);
    attach<CostFn<matmulCost<MatMulBiasAddOp, 2>>::Model, MatMulBiasAddOp>(ctx);
    attach<CostFn<matmulCost<MatMulAddOp, 1>>::Model, MatMulAddOp>(ctx);
    attach<CostFn<matmulCost<MatMulBiasGeluOp, 9>>::Model, MatMulBiasGeluOp>(
        ctx);
    attach<CostFn<matmulCost<MatMulGeluGradOp, 14>>::Model, MatMulGeluGradOp>(
        ctx);
    attach<CostFn<matmulBiasGradCost>::Model, MatMulBiasGradOp>(ctx);
    attach<CostFn<reduceCost>::Model, ReduceSumOp, ReduceMeanOp,
           ReduceMaxOp>(ctx);
    attach<CostFn<sumSquaresCost>::Model, SumSquaresOp>(ctx);
    attach<CostFn<streamingCost<5>>::Model, SoftmaxOp, LogSoftmaxOp>(ctx);
    attach<Streaming1, CumSumOp>(ctx);
    MatMulOp::attachInterface<MatMulTpRule>(*ctx);
    attach<SoftmaxTpRule, SoftmaxOp, LogSoftmaxOp>(ctx);
  });
}

} // namespace smp
