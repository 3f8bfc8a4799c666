//===- Elementwise.cpp - Op models of the elementwise smp ops -------------===//
//
// Unary ops (exp, gelu, cast, ...), broadcasting binary ops (add, mul, the
// comparisons, mod, where) and gelu's backward: gradients, costs and
// sharding rules.
//
//===----------------------------------------------------------------------===//

#include "OpModelSupport.h"
#include "smp/Dialect/Smp/IR/DropoutKey.h"

#include <cmath>

using namespace mlir;
using namespace smp::autodiff;

namespace smp {

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

//===--- Binary: gradients are reduced back over broadcast dims -----------===//

SMP_VJP(AddOp) {
  Grad G{b, op.getLoc()};
  if (need[0])
    gx[0] = G.unbroadcast(gy[0], op.getLhs().getType());
  if (need[1])
    gx[1] = G.unbroadcast(gy[0], op.getRhs().getType());
  return success();
}

SMP_VJP(SubOp) {
  Grad G{b, op.getLoc()};
  if (need[0])
    gx[0] = G.unbroadcast(gy[0], op.getLhs().getType());
  if (need[1])
    gx[1] = G.unbroadcast(G.neg(gy[0]), op.getRhs().getType());
  return success();
}

SMP_VJP(MulOp) {
  Grad G{b, op.getLoc()};
  if (need[0])
    gx[0] = G.unbroadcast(G.mul(gy[0], op.getRhs()), op.getLhs().getType());
  if (need[1])
    gx[1] = G.unbroadcast(G.mul(gy[0], op.getLhs()), op.getRhs().getType());
  return success();
}

SMP_VJP(DivOp) {
  Grad G{b, op.getLoc()};
  Value ga = G.div(gy[0], op.getRhs());
  if (need[0])
    gx[0] = G.unbroadcast(ga, op.getLhs().getType());
  if (need[1]) // d(a/b)/db = -(a/b)/b
    gx[1] = G.unbroadcast(G.neg(G.mul(ga, op.getResult())),
                          op.getRhs().getType());
  return success();
}

SMP_VJP(PowOp) {
  Grad G{b, op.getLoc()};
  Value a = op.getLhs(), e = op.getRhs();
  if (need[0]) { // e * a^(e - 1)
    Value em1 = G.sub(e, G.scalar(e, 1.0));
    Value d = G.mul(e, PowOp::create(b, op.getLoc(), a, em1));
    gx[0] = G.unbroadcast(G.mul(gy[0], d), a.getType());
  }
  if (need[1]) // a^e * ln a
    gx[1] = G.unbroadcast(
        G.mul(gy[0], G.mul(op.getResult(), LogOp::create(b, op.getLoc(), a))),
        e.getType());
  return success();
}

/// r = a - q * b with q = floor(a / b) (or trunc with fmod), constant
/// between the jumps: dr/da = 1, dr/db = -q, where q = (a - r) / b (an
/// integer up to rounding; PyTorch's fmod/remainder use the same formula
/// with q computed from a / b directly).
SMP_VJP(ModOp) {
  Grad G{b, op.getLoc()};
  if (need[0])
    gx[0] = G.unbroadcast(gy[0], op.getLhs().getType());
  if (need[1]) {
    Value q = G.div(G.sub(op.getLhs(), op.getResult()), op.getRhs());
    gx[1] = G.unbroadcast(G.neg(G.mul(gy[0], q)), op.getRhs().getType());
  }
  return success();
}

/// max/min: the gradient goes to the winner; ties split it in half (as
/// torch.maximum / torch.minimum do), or with `strict` go to neither (a
/// clamp's bound, as nn.ReLU6 / nn.Hardtanh).
template <typename WinsOp>
static LogicalResult
vjpMinMax(Operation *op, Value a, Value c, bool strict, OpBuilder &b,
          ArrayRef<Value> gy, ArrayRef<bool> need, SmallVectorImpl<Value> &gx) {
  Grad G{b, op->getLoc()};
  Value g = gy[0];
  Value zero = G.scalar(g, 0.0);
  Value atTie = zero;
  if (!strict)
    atTie = G.where(EqualOp::create(b, op->getLoc(), a, c),
                    G.mul(g, G.scalar(g, 0.5)), zero);
  if (need[0]) {
    Value wins = WinsOp::create(b, op->getLoc(), a, c);
    gx[0] = G.unbroadcast(G.where(wins, g, atTie), a.getType());
  }
  if (need[1]) {
    Value wins = WinsOp::create(b, op->getLoc(), c, a);
    gx[1] = G.unbroadcast(G.where(wins, g, atTie), c.getType());
  }
  return success();
}
SMP_VJP(MaxOp) {
  return vjpMinMax<GreaterOp>(op, op.getLhs(), op.getRhs(), op.getStrict(), b,
                              gy, need, gx);
}
SMP_VJP(MinOp) {
  return vjpMinMax<LessOp>(op, op.getLhs(), op.getRhs(), op.getStrict(), b, gy,
                           need, gx);
}

//===--- Unary ------------------------------------------------------------===//

SMP_VJP(NegOp) {
  gx[0] = Grad{b, op.getLoc()}.neg(gy[0]);
  return success();
}

SMP_VJP(AbsOp) {
  Grad G{b, op.getLoc()};
  Value x = op.getInput(), zero = G.scalar(x, 0.0);
  Value pos = GreaterOp::create(b, op.getLoc(), x, zero);
  Value negv = LessOp::create(b, op.getLoc(), x, zero);
  gx[0] = G.where(pos, gy[0], G.where(negv, G.neg(gy[0]), zero));
  return success();
}

SMP_VJP(ExpOp) {
  gx[0] = Grad{b, op.getLoc()}.mul(gy[0], op.getResult());
  return success();
}

SMP_VJP(LogOp) {
  gx[0] = Grad{b, op.getLoc()}.div(gy[0], op.getInput());
  return success();
}

SMP_VJP(SqrtOp) { // g / (2 sqrt x)
  Grad G{b, op.getLoc()};
  gx[0] = G.div(gy[0], G.mul(op.getResult(), G.scalar(gy[0], 2.0)));
  return success();
}

SMP_VJP(RsqrtOp) { // -0.5 g y^3
  Grad G{b, op.getLoc()};
  Value y = op.getResult();
  gx[0] = G.mul(G.mul(gy[0], G.mul(y, G.mul(y, y))), G.scalar(y, -0.5));
  return success();
}

SMP_VJP(ReciprocalOp) { // -g y^2
  Grad G{b, op.getLoc()};
  Value y = op.getResult();
  gx[0] = G.neg(G.mul(gy[0], G.mul(y, y)));
  return success();
}

SMP_VJP(TanhOp) { // g (1 - y^2)
  Grad G{b, op.getLoc()};
  Value y = op.getResult();
  gx[0] = G.mul(gy[0], G.sub(G.scalar(y, 1.0), G.mul(y, y)));
  return success();
}

SMP_VJP(ErfOp) { // g 2/sqrt(pi) exp(-x^2)
  Grad G{b, op.getLoc()};
  Value x = op.getInput();
  Value e = ExpOp::create(b, op.getLoc(), G.neg(G.mul(x, x)));
  gx[0] = G.mul(G.mul(gy[0], e), G.scalar(x, 2.0 / std::sqrt(M_PI)));
  return success();
}

SMP_VJP(SigmoidOp) { // g y (1 - y)
  Grad G{b, op.getLoc()};
  Value y = op.getResult();
  gx[0] = G.mul(gy[0], G.mul(y, G.sub(G.scalar(y, 1.0), y)));
  return success();
}

SMP_VJP(SiluOp) { // g (s + x s (1 - s)), s = sigmoid(x)
  Grad G{b, op.getLoc()};
  Value x = op.getInput();
  Value s = SigmoidOp::create(b, op.getLoc(), x);
  Value d = G.add(s, G.mul(G.mul(x, s), G.sub(G.scalar(x, 1.0), s)));
  gx[0] = G.mul(gy[0], d);
  return success();
}

SMP_VJP(ReluOp) {
  Grad G{b, op.getLoc()};
  Value x = op.getInput();
  if (!isa<FloatType>(typeOf(x).getElementType()))
    return success();
  Value pos = GreaterOp::create(b, op.getLoc(), x, G.scalar(x, 0.0));
  gx[0] = G.where(pos, gy[0], G.scalar(x, 0.0));
  return success();
}

SMP_VJP(SinOp) {
  Grad G{b, op.getLoc()};
  gx[0] = G.mul(gy[0], CosOp::create(b, op.getLoc(), op.getInput()));
  return success();
}

SMP_VJP(CosOp) {
  Grad G{b, op.getLoc()};
  gx[0] = G.neg(G.mul(gy[0], SinOp::create(b, op.getLoc(), op.getInput())));
  return success();
}

SMP_VJP(LeakyReluOp) { // x > 0 ? g : alpha g (PyTorch)
  Grad G{b, op.getLoc()};
  Value x = op.getInput();
  Value pos = GreaterOp::create(b, op.getLoc(), x, G.scalar(x, 0.0));
  double alpha = op.getAlpha().convertToDouble();
  gx[0] = G.where(pos, gy[0], G.mul(gy[0], G.scalar(x, alpha)));
  return success();
}

SMP_VJP(DropoutOp) { // the same mask on dy: drawn again, not stored
  auto d = cast<DropoutOp>(b.clone(*op.getOperation()));
  d->setOperand(0, gy[0]);
  // The clone keeps the forward's annotations; the backward's are the
  // caller's to add.
  for (NamedAttribute a : llvm::to_vector(d->getDiscardableAttrs()))
    d->removeDiscardableAttr(a.getName());
  gx[0] = d.getResult();
  return success();
}

SMP_VJP(GeluOp) {
  gx[0] = GeluGradOp::create(b, op.getLoc(), op.getInput(), gy[0],
                             op.getApproximate());
  return success();
}

SMP_VJP(CastOp) {
  Type in = typeOf(op.getInput()).getElementType();
  if (!isa<FloatType>(in))
    return success();
  gx[0] = Grad{b, op.getLoc()}.cast(gy[0], in);
  return success();
}

SMP_VJP(WhereOp) {
  Grad G{b, op.getLoc()};
  Value zero = G.scalar(gy[0], 0.0);
  if (need[1])
    gx[1] = G.unbroadcast(G.where(op.getCondition(), gy[0], zero),
                          op.getLhs().getType());
  if (need[2])
    gx[2] = G.unbroadcast(G.where(op.getCondition(), zero, gy[0]),
                          op.getRhs().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Sharding rules
//===----------------------------------------------------------------------===//

namespace {

/// A broadcasting elementwise op whose result is split: an operand that
/// spans the split dimension is split along its own (aligned) dimension, a
/// weight sliced as such; one that does not (lower rank, or size 1 there)
/// is read whole by every rank.
template <typename OpT>
struct BroadcastTpRule : public TpRule<BroadcastTpRule<OpT>, OpT> {
  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult result, TpShard s, int64_t tp,
                      function_ref<bool(Value)> isWeight,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    int64_t resultRank = shapeOf(result).size();
    for (Value o : op->getOperands()) {
      int64_t ad =
          s.dim - (resultRank - static_cast<int64_t>(shapeOf(o).size()));
      if (ad < 0 || shapeOf(o)[ad] == 1)
        layouts.push_back(TpOperandLayout::whole());
      else if (isWeight(o))
        layouts.push_back(TpOperandLayout::splitWeight({ad, s.blocks}));
      else
        layouts.push_back(TpOperandLayout::split({ad, s.blocks}));
    }
    return success();
  }
};

/// dropout splits as the result, and records the split: its mask is the
/// global tensor's (each rank draws its part).
struct DropoutTpRule : public TpRule<DropoutTpRule, DropoutOp> {
  LogicalResult
  getTpOperandLayouts(Operation *, OpResult, TpShard s, int64_t,
                      function_ref<bool(Value)>,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    layouts.push_back(TpOperandLayout::split(s));
    return success();
  }
  bool splitsTpWeightChains(Operation *) const { return true; }
  void shrinkForTp(Operation *op, OpResult, TpShard s, int64_t tp) const {
    setDropoutTpSplit(op, s.dim, tp, s.blocks);
  }
};

} // namespace

void registerElementwiseOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp,
           ModOp, WhereOp, NegOp, AbsOp, ExpOp, LogOp, SqrtOp, RsqrtOp,
           ReciprocalOp, TanhOp, ErfOp, SigmoidOp, SiluOp, ReluOp, SinOp, CosOp,
           LeakyReluOp, GeluOp, CastOp, DropoutOp>(ctx);
    // Transcendental functions: a few FLOPs per element.
    attach<CostFn<streamingCost<4>>::Model, ExpOp, LogOp, SqrtOp, RsqrtOp,
           ReciprocalOp, SigmoidOp, TanhOp, ErfOp, SinOp, CosOp, PowOp>(ctx);
    attach<CostFn<streamingCost<8>>::Model, GeluOp, SiluOp, LeakyReluOp>(ctx);
    // bias_gelu_grad: gelu_grad's count also covers the column sums' adds.
    attach<CostFn<streamingCost<12>>::Model, GeluGradOp, BiasGeluGradOp>(ctx);
    // dropout: a Philox draw (20 integer multiplies) per element.
    attach<CostFn<streamingCost<24>>::Model, DropoutOp>(ctx);
    attach<Streaming1, NegOp, AbsOp, ReluOp, NotOp, CastOp, CastMultiOp,
           AddMultiOp, AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, ModOp, WhereOp,
           EqualOp, LessOp, GreaterOp, AndOp, OrOp>(ctx);
    // Comparisons and logical ops split like the rest: the masks of
    // ELU, PReLU, Hardtanh and the like (`where(x > 0, ...)`) stay inside a
    // tensor-parallel region.
    attach<BroadcastTpRule, AddOp, SubOp, MulOp, DivOp, MaxOp, MinOp, PowOp,
           ModOp, WhereOp, EqualOp, LessOp, GreaterOp, AndOp, OrOp>(ctx);
    attach<SameSplitTpRule, NegOp, AbsOp, ExpOp, LogOp, SqrtOp, RsqrtOp,
           ReciprocalOp, TanhOp, ErfOp, SigmoidOp, SiluOp, ReluOp, SinOp,
           CosOp, NotOp, LeakyReluOp, GeluOp, CastOp>(ctx);
    DropoutOp::attachInterface<DropoutTpRule>(*ctx);
  });
}

} // namespace smp
