//===- Attention.cpp - Op models of attention and attention_grad ----------===//
//
// The fused attention op: its gradient (attention_grad, which recomputes the
// probabilities from the saved log-sum-exp, and attention_mask_grad for a
// trainable additive mask), its cost (the FLOPs of the key
// pairs a query may attend and the bytes of q, k, v, the output and the
// statistics: no score matrix) and its sharding rule (split by heads).
//
//===----------------------------------------------------------------------===//

#include "OpModelSupport.h"
#include "smp/Dialect/Smp/IR/DropoutKey.h"

using namespace mlir;

namespace smp {

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

SMP_VJP(AttentionOp) {
  if (gy.size() > 1 && gy[1])
    return op.emitOpError("the log-sum-exp result has a gradient; only the "
                          "output may be differentiated");
  if (!gy[0])
    return success();
  auto grads = AttentionGradOp::create(
      b, op.getLoc(), op.getQuery(), op.getKey(), op.getValue(), op.getResult(),
      op.getLse(), gy[0], op.getMask(), op.getScaleAttr(), op.getCausalAttr(),
      op.getBshdAttr());
  copyDropoutKey(op, grads); // the forward's mask, drawn again
  gx[0] = grads.getQueryGrad();
  gx[1] = grads.getKeyGrad();
  gx[2] = grads.getValueGrad();
  // A trainable additive mask (T5's relative position bias).
  if (op.getMask() && need[3]) {
    auto maskGrad = AttentionMaskGradOp::create(
        b, op.getLoc(), op.getQuery(), op.getKey(), op.getValue(),
        op.getResult(), op.getLse(), gy[0], op.getMask(), op.getScaleAttr(),
        op.getCausalAttr(), op.getBshdAttr());
    copyDropoutKey(op, maskGrad);
    gx[3] = maskGrad;
  }
  return success();
}

SMP_VJP(PackedAttentionOp) {
  if (gy.size() > 1 && gy[1])
    return op.emitOpError("the log-sum-exp result has a gradient; only the "
                          "output may be differentiated");
  if (op.getMask() && need[1])
    return op.emitOpError("its mask needs a gradient, which only "
                          "smp.attention computes (smp.attention_mask_grad)");
  if (gy[0]) {
    auto grad = PackedAttentionGradOp::create(
        b, op.getLoc(), op.getQkv(), op.getResult(), op.getLse(), gy[0],
        op.getMask(), op.getScaleAttr(), op.getCausalAttr(),
        op.getKvHeadsAttr());
    copyDropoutKey(op, grad);
    gx[0] = grad;
  }
  return success();
}

} // namespace smp

namespace {

using namespace smp;

//===----------------------------------------------------------------------===//
// Costs
//===----------------------------------------------------------------------===//

/// The (query, key) pairs of one head that take part: all S x Sk, or with
/// `causal` the keys j <= i of each query i.
double attendedPairs(int64_t s, int64_t sk, bool causal) {
  if (!causal)
    return static_cast<double>(s) * static_cast<double>(sk);
  double pairs = 0;
  int64_t full = std::min(s, sk); // queries 0..full-1 see i + 1 keys
  pairs += static_cast<double>(full) * static_cast<double>(full + 1) / 2;
  pairs += static_cast<double>(s - full) * static_cast<double>(sk);
  return pairs;
}

/// The cost of attending `heads` query heads of `s` queries to `sk` keys in
/// each of `batch` sequences at dMul D + dvMul Dv FLOPs a pair; the bytes
/// are the operands' and results'.
OpCost attentionCostFrom(Operation *op, int64_t batch, int64_t heads, int64_t s,
                         int64_t sk, int64_t d, int64_t dv, bool causal,
                         double dMul, double dvMul) {
  double pairs = static_cast<double>(batch) * static_cast<double>(heads) *
                 attendedPairs(s, sk, causal);
  OpCost c = streaming(op, 0);
  c.flops =
      pairs * (dMul * static_cast<double>(d) + dvMul * static_cast<double>(dv));
  c.matrix = true;
  return c;
}

/// FLOPs per attended pair, and the shapes they scale with.
template <typename OpT> OpCost attentionCostOf(Operation *op, double dMul,
                                                double dvMul) {
  auto a = cast<OpT>(op);
  ArrayRef<int64_t> q = shapeOf(a.getQuery()), v = shapeOf(a.getValue());
  int h = a.getBshd() ? 2 : 1, s = a.getBshd() ? 1 : 2; // heads, sequence
  return attentionCostFrom(op, q[0], q[h], q[s], shapeOf(a.getKey())[s], q[3],
                           v[3], a.getCausal(), dMul, dvMul);
}

/// The packed ops: qkv [B, S, Hq + 2 Hkv, D].
template <typename OpT>
OpCost packedCostOf(Operation *op, double dMul, double dvMul) {
  auto a = cast<OpT>(op);
  ArrayRef<int64_t> t = shapeOf(a.getQkv());
  int64_t hq = t[2] - 2 * static_cast<int64_t>(a.getKvHeads());
  return attentionCostFrom(op, t[0], hq, t[1], t[1], t[3], t[3], a.getCausal(),
                           dMul, dvMul);
}

/// Forward: q.k (2 D FLOPs a pair) and p.v (2 Dv).
OpCost attentionCost(Operation *op) {
  return attentionCostOf<AttentionOp>(op, 2, 2);
}

/// Backward in two passes, both recomputing the scores: dk and dv (q.k, do.v,
/// p^T do, ds^T q: 4 D + 4 Dv) and dq (q.k, do.v, ds k: 4 D + 2 Dv).
OpCost attentionGradCost(Operation *op) {
  return attentionCostOf<AttentionGradOp>(op, 8, 6);
}

OpCost packedAttentionCost(Operation *op) {
  return packedCostOf<PackedAttentionOp>(op, 2, 2);
}
OpCost packedAttentionGradCost(Operation *op) {
  return packedCostOf<PackedAttentionGradOp>(op, 8, 6);
}

/// The mask's gradient recomputes the scores and dP (q.k, do.v: 2 D + 2 Dv).
OpCost attentionMaskGradCost(Operation *op) {
  return attentionCostOf<AttentionMaskGradOp>(op, 2, 2);
}

//===----------------------------------------------------------------------===//
// Sharding rule
//===----------------------------------------------------------------------===//

/// Split by heads (dim 1 of every operand and result; of q, k, v and the
/// output dim 2 with bshd): each rank attends its query heads with their
/// key/value heads. A mask broadcast over the heads is read whole; a
/// per-head mask is split alike (dim 1). With fewer key/value heads than
/// ranks (multi-query attention; grouped-query attention over a larger tp,
/// tp a multiple of them), k and v are read whole (Megatron replicates
/// them): each rank attends with the one key/value head of its query heads
/// (finishTp), and the k/v gradients the ranks compute, each from its own
/// query heads, are summed by the entry's smp.tp_copy.
struct AttentionTpRule : public TpRule<AttentionTpRule, AttentionOp> {
  static constexpr const char *kWholeKv = "smp.tp_whole_kv";

  static int64_t headsDim(AttentionOp a) { return a.getBshd() ? 2 : 1; }

  /// Key/value heads read whole: fewer than the ranks, which they divide.
  static bool wholeKv(AttentionOp a, int64_t tp) {
    int64_t kv = shapeOf(a.getKey())[headsDim(a)];
    return tp > 1 && kv % tp != 0 && tp % kv == 0;
  }

  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult result, TpShard s, int64_t tp,
                      function_ref<bool(Value)>,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    auto a = cast<AttentionOp>(op);
    int64_t heads = headsDim(a);
    if (result != a.getResult() || s.dim != heads || s.blocks != 1)
      return failure();
    bool whole = wholeKv(a, tp);
    layouts.push_back(TpOperandLayout::split({heads, 1}));
    for (int i = 1; i < 3; ++i)
      layouts.push_back(whole ? TpOperandLayout::whole()
                              : TpOperandLayout::split({heads, 1}));
    if (Value mask = a.getMask())
      layouts.push_back(shapeOf(mask)[1] == 1
                            ? TpOperandLayout::whole()
                            : TpOperandLayout::split({1, 1}));
    return success();
  }

  /// The log-sum-exp [B, H, S, 2] is split by heads with the output. (k
  /// and v read whole are marked for finishTp while their shape is global.)
  /// A dropout on the probabilities draws this rank's heads of the mask:
  /// a split of dim 1 of [B, Hq, S, Sk], in either layout.
  void shrinkForTp(Operation *op, OpResult, TpShard, int64_t tp) const {
    if (drawsDropout(op))
      setDropoutTpSplit(op, 1, tp, 1);
    if (wholeKv(cast<AttentionOp>(op), tp))
      op->setAttr(kWholeKv, UnitAttr::get(op->getContext()));
    Value lse = cast<AttentionOp>(op).getLse();
    auto t = cast<RankedTensorType>(lse.getType());
    SmallVector<int64_t> shape(t.getShape());
    shape[1] /= tp;
    lse.setType(t.clone(shape));
  }

  /// k and v read whole with several key/value heads: this rank's query
  /// heads (a contiguous 1/tp of them) share one, head (rank * kv / tp),
  /// gathered from each.
  void finishTp(Operation *op, int64_t tp) const {
    auto a = cast<AttentionOp>(op);
    if (!op->removeAttr(kWholeKv))
      return;
    int64_t dim = headsDim(a);
    int64_t kv = shapeOf(a.getKey())[dim];
    if (kv == 1)
      return;
    OpBuilder b(op);
    Location loc = op->getLoc();
    auto i64 = b.getI64Type();
    SmallVector<int64_t> table;
    for (int64_t r = 0; r < tp; ++r)
      table.push_back(r * kv / tp);
    auto tableType = RankedTensorType::get({tp}, i64);
    Value headOf = ConstantOp::create(
        b, loc, DenseElementsAttr::get(tableType, ArrayRef<int64_t>(table)));
    Value rank = TpRankOp::create(b, loc, RankedTensorType::get({}, i64));
    Value rank1 =
        ReshapeOp::create(b, loc, RankedTensorType::get({1}, i64), rank);
    Value head =
        GatherOp::create(b, loc, headOf, rank1, b.getI64IntegerAttr(0));
    for (OpOperand *operand : {&a.getKeyMutable(), &a.getValueMutable()})
      operand->set(GatherOp::create(b, loc, operand->get(), head,
                                    b.getI64IntegerAttr(dim)));
  }
};

} // namespace

namespace smp {

void registerAttentionOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, AttentionOp>(ctx);
    attach<CostFn<attentionCost>::Model, AttentionOp>(ctx);
    attach<CostFn<attentionGradCost>::Model, AttentionGradOp>(ctx);
    attach<CostFn<attentionMaskGradCost>::Model, AttentionMaskGradOp>(ctx);
    attach<GradientModel, PackedAttentionOp>(ctx);
    attach<CostFn<packedAttentionCost>::Model, PackedAttentionOp>(ctx);
    attach<CostFn<packedAttentionGradCost>::Model, PackedAttentionGradOp>(ctx);
    AttentionOp::attachInterface<AttentionTpRule>(*ctx);
  });
}

} // namespace smp
