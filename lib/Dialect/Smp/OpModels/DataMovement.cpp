//===- DataMovement.cpp - Op models of the data-movement ops ----------------===//
//
// constant, reshape, transpose, expand, tile, slice, concat, split, trilu
// and slice_grad: gradients, costs and sharding rules.
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

SMP_VJP(ReshapeOp) {
  gx[0] = Grad{b, op.getLoc()}.reshape(gy[0], typeOf(op.getInput()).getShape());
  return success();
}

SMP_VJP(TransposeOp) {
  ArrayRef<int64_t> perm = op.getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inverse[perm[i]] = i;
  gx[0] = TransposeOp::create(b, op.getLoc(), gy[0],
                              b.getDenseI64ArrayAttr(inverse));
  return success();
}

SMP_VJP(ExpandOp) {
  gx[0] = Grad{b, op.getLoc()}.unbroadcast(gy[0], op.getInput().getType());
  return success();
}

/// The sum over the copies: gy [r0 d0, r1 d1, ..] viewed as
/// [r0, d0, r1, d1, ..] (each copy is one index of the r axes) and summed
/// over the r axes.
SMP_VJP(TileOp) {
  Grad G{b, op.getLoc()};
  ArrayRef<int64_t> in = typeOf(op.getInput()).getShape();
  SmallVector<int64_t> view, axes;
  for (auto [d, r] : llvm::zip(in, op.getRepeats())) {
    if (r != 1) {
      axes.push_back(static_cast<int64_t>(view.size()));
      view.push_back(r);
    }
    view.push_back(d);
  }
  if (axes.empty()) {
    gx[0] = gy[0];
    return success();
  }
  gx[0] = G.sum(G.reshape(gy[0], view), axes, /*keepdims=*/false);
  return success();
}

SMP_VJP(SliceOp) {
  gx[0] = SliceGradOp::create(b, op.getLoc(), op.getInput().getType(), gy[0],
                              op.getStartsAttr(), op.getLimitsAttr(),
                              op.getStepsAttr());
  return success();
}

SMP_VJP(ConcatOp) {
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

SMP_VJP(SplitOp) {
  Grad G{b, op.getLoc()};
  SmallVector<Value> parts;
  for (auto [result, g] : llvm::zip(op.getResults(), gy))
    parts.push_back(g ? g : G.zeros(result.getType()));
  gx[0] = ConcatOp::create(b, op.getLoc(), parts, op.getAxisAttr());
  return success();
}

SMP_VJP(TriluOp) {
  gx[0] = TriluOp::create(b, op.getLoc(), gy[0], op.getUpperAttr(),
                          op.getKAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// Sharding rules
//===----------------------------------------------------------------------===//

namespace {

/// The input split along the dimension the permutation moves to the split
/// one (also in weight chains: a transposed weight).
struct TransposeTpRule : public TpRule<TransposeTpRule, TransposeOp> {
  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult, TpShard s, int64_t tp,
                      function_ref<bool(Value)>,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    layouts.push_back(TpOperandLayout::split(
        {cast<TransposeOp>(op).getPerm()[s.dim], s.blocks}));
    return success();
  }
  bool splitsTpWeightChains(Operation *) const { return true; }
};

/// The input split along the dimension that starts where the split one
/// does (the same number of elements before it) and divides or is divided
/// by it: splitting heads x head_dim as heads, or the reverse. A split in
/// blocks (a fused QKV projection's output) passes through a dimension of
/// the same size only (the [tokens, 3H] product viewed as [B, S, 3H]).
struct ReshapeTpRule : public TpRule<ReshapeTpRule, ReshapeOp> {
  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult result, TpShard s, int64_t tp,
                      function_ref<bool(Value)>,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    ArrayRef<int64_t> in = shapeOf(op->getOperand(0)), out = shapeOf(result);
    int64_t pre = 1;
    for (int64_t e = 0; e < s.dim; ++e)
      pre *= out[e];
    int64_t p = 1;
    for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
      if (p == pre && s.blocks != 1 && in[d] == out[s.dim]) {
        layouts.push_back(TpOperandLayout::split({d, s.blocks}));
        return success();
      }
      if (p == pre && s.blocks == 1 && in[d] != 1 &&
          (in[d] % out[s.dim] == 0 || out[s.dim] % in[d] == 0)) {
        layouts.push_back(TpOperandLayout::split({d, 1}));
        return success();
      }
      p *= in[d];
    }
    return failure();
  }
};

/// A tile that repeats the split dimension once: the input split alike
/// (each rank's share of the result is its share of the input, tiled).
struct TileTpRule : public TpRule<TileTpRule, TileOp> {
  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult, TpShard s, int64_t tp,
                      function_ref<bool(Value)>,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    if (cast<TileOp>(op).getRepeats()[s.dim] != 1)
      return failure();
    layouts.push_back(TpOperandLayout::split(s));
    return success();
  }
};

/// A slice that keeps the whole split dimension.
struct SliceTpRule : public TpRule<SliceTpRule, SliceOp> {
  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult, TpShard s, int64_t tp,
                      function_ref<bool(Value)>,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    auto sl = cast<SliceOp>(op);
    int64_t d = s.dim;
    if (sl.getStarts()[d] != 0 || sl.getSteps()[d] != 1 ||
        sl.getLimits()[d] < shapeOf(sl.getInput())[d])
      return failure();
    layouts.push_back(TpOperandLayout::split(s));
    return success();
  }
  void shrinkForTp(Operation *op, OpResult, TpShard s, int64_t tp) const {
    auto sl = cast<SliceOp>(op);
    SmallVector<int64_t> limits(sl.getLimits());
    limits[s.dim] /= tp;
    sl.setLimits(limits);
  }
};

/// A concatenation along another dimension: every input split alike.
struct ConcatTpRule : public TpRule<ConcatTpRule, ConcatOp> {
  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult result, TpShard s, int64_t tp,
                      function_ref<bool(Value)>,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    auto c = cast<ConcatOp>(op);
    // Along the split dimension the pieces cannot each be split alike. The
    // axis may be negative (ONNX's, kept by the importer).
    if (axisIndex(static_cast<int64_t>(c.getAxis()),
                  shapeOf(result).size()) == s.dim)
      return failure();
    layouts.assign(op->getNumOperands(), TpOperandLayout::split(s));
    return success();
  }
};

/// A split along another dimension: the input split alike. Along the split
/// dimension into equal parts (a fused QKV projection cut into Q, K and
/// V): the input split in as many blocks, each rank holding its share of
/// every part.
struct SplitTpRule : public TpRule<SplitTpRule, SplitOp> {
  /// The split's axis, counted from 0 (it may be stored negative).
  static int64_t splitAxis(SplitOp sp) {
    return axisIndex(static_cast<int64_t>(sp.getAxis()),
                     shapeOf(sp.getInput()).size());
  }

  LogicalResult
  getTpOperandLayouts(Operation *op, OpResult result, TpShard s, int64_t tp,
                      function_ref<bool(Value)>,
                      SmallVectorImpl<TpOperandLayout> &layouts) const {
    auto sp = cast<SplitOp>(op);
    if (splitAxis(sp) != s.dim) {
      layouts.push_back(TpOperandLayout::split(s));
      return success();
    }
    ArrayRef<int64_t> sizes = sp.getSizes();
    if (s.blocks != 1 || !llvm::all_equal(sizes))
      return failure();
    layouts.push_back(TpOperandLayout::split(
        {s.dim, static_cast<int64_t>(sizes.size())}));
    return success();
  }
  void shrinkForTp(Operation *op, OpResult result, TpShard s,
                   int64_t tp) const {
    auto sp = cast<SplitOp>(op);
    if (splitAxis(sp) != s.dim)
      return;
    SmallVector<int64_t> sizes(sp.getSizes());
    for (int64_t &n : sizes)
      n /= tp;
    sp.setSizes(sizes);
  }
};

} // namespace

void registerDataMovementOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, ReshapeOp, TransposeOp, ExpandOp, TileOp, SliceOp,
           ConcatOp, SplitOp, TriluOp>(ctx);
    // A reshape is a view (the runtime aliases it); the others copy.
    attach<NoCost, ConstantOp, ReshapeOp>(ctx);
    attach<Streaming0, TransposeOp, SliceOp, ConcatOp, SplitOp, ExpandOp,
           TileOp, SliceGradOp>(ctx);
    attach<Streaming1, TriluOp>(ctx);
    TransposeOp::attachInterface<TransposeTpRule>(*ctx);
    ReshapeOp::attachInterface<ReshapeTpRule>(*ctx);
    TileOp::attachInterface<TileTpRule>(*ctx);
    SliceOp::attachInterface<SliceTpRule>(*ctx);
    ConcatOp::attachInterface<ConcatTpRule>(*ctx);
    SplitOp::attachInterface<SplitTpRule>(*ctx);
  });
}

} // namespace smp
