//===- FuseBackward.cpp - smp-fuse-backward -------------------------------===//
//
// Implements `smp-fuse-backward`: the bias sum after a GELU gradient and the
// residual add after a norm gradient folded into those ops' kernels, and a
// sum over ranks of which each keeps only its part made a reduce_scatter.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Dominance.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-fuse-backward"

namespace smp {
#define GEN_PASS_DEF_SMPFUSEBACKWARDPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// reduce_sum(gelu_grad(x, dy), leading dims) -> bias_gelu_grad.
bool fuseBiasGeluGrad(ReduceSumOp sum) {
  auto gelu = sum.getInput().getDefiningOp<GeluGradOp>();
  if (!gelu)
    return false;
  auto type = cast<RankedTensorType>(gelu.getType());
  auto sumType = cast<RankedTensorType>(sum.getType());
  if (type.getRank() < 2 || !type.hasStaticShape() ||
      !reducesLeadingDims(sum.getAxes(), type.getRank()) ||
      sumType.getElementType() != type.getElementType() ||
      sumType.getNumElements() != type.getShape().back())
    return false;
  if (sumType.getRank() != 1 && sumType.getRank() != type.getRank())
    return false; // keepdims gives [1, .., 1, N]; [N] without
  OpBuilder b(gelu);
  auto fused = BiasGeluGradOp::create(
      b, gelu.getLoc(), TypeRange{type, sumType}, gelu.getInput(),
      gelu.getGrad(), gelu.getApproximateAttr());
  fused->setDiscardableAttrs(gelu->getDiscardableAttrDictionary());
  gelu.getResult().replaceAllUsesWith(fused.getInputGrad());
  sum.getResult().replaceAllUsesWith(fused.getBiasGrad());
  sum.erase();
  gelu.erase();
  return true;
}

/// add(r, norm_grad#0) -> norm_grad(..., residual r), where norm_grad#0 has
/// no other use and the new op can sit where the old one was (r defined
/// before it).
template <class NormGradOp>
bool fuseResidual(AddOp add, DominanceInfo &dom) {
  for (auto [r, g] : {std::pair(add.getLhs(), add.getRhs()),
                      std::pair(add.getRhs(), add.getLhs())}) {
    auto norm = g.template getDefiningOp<NormGradOp>();
    if (!norm || norm.getResidual() || g != norm.getInputGrad() ||
        !g.hasOneUse() || r.getType() != g.getType() ||
        add.getType() != g.getType() || !dom.properlyDominates(r, norm))
      continue;
    OpBuilder b(norm);
    auto fused = cast<NormGradOp>(b.clone(*norm));
    fused.getResidualMutable().assign(r);
    add.getResult().replaceAllUsesWith(fused.getInputGrad());
    add.erase();
    for (auto [from, to] : llvm::zip(norm->getResults(), fused->getResults()))
      from.replaceAllUsesWith(to);
    norm.erase();
    return true;
  }
  return false;
}

/// all_slice(all_reduce(x)) -> reduce_scatter(x) (through a reshape
/// between them, a view) when the all_reduce (a sum) and the reshape have no
/// other use and both collectives span the same ranks: the gradient of a
/// sequence-parallel region's entry (tp_copy after all_gather).
bool fuseReduceScatter(shard::AllSliceOp slice) {
  Value in = slice.getInput();
  auto view = in.getDefiningOp<ReshapeOp>();
  bool throughView = view && view.getResult().hasOneUse();
  if (throughView)
    in = view.getInput();
  auto sum = in.getDefiningOp<shard::AllReduceOp>();
  if (!sum || !sum.getResult().hasOneUse() ||
      sum.getReduction() != shard::ReductionKind::Sum ||
      sum.getGrid() != slice.getGrid() ||
      sum.getGridAxes() != slice.getGridAxes())
    return false;
  OpBuilder b(slice);
  MLIRContext *ctx = b.getContext();
  Value x = sum.getInput();
  if (throughView) {
    x = ReshapeOp::create(b, view.getLoc(), view.getType(), x);
    x.getDefiningOp()->setDiscardableAttrs(
        view->getDiscardableAttrDictionary());
  }
  auto rs = shard::ReduceScatterOp::create(
      b, slice.getLoc(), slice.getType(), slice.getGridAttr(),
      slice.getGridAxesAttr(), x,
      shard::ReductionKindAttr::get(ctx, shard::ReductionKind::Sum),
      slice.getSliceAxisAttr());
  rs->setDiscardableAttrs(slice->getDiscardableAttrDictionary());
  slice.getResult().replaceAllUsesWith(rs.getResult());
  slice.erase();
  if (throughView)
    view.erase();
  sum.erase();
  return true;
}

/// all_gather(all_slice(x)) -> x: the slice's input is the same on every
/// rank of the group (all_slice's contract), so gathering the parts back
/// gives it (the gradient of a value gathered from rows, then scattered).
bool foldGatherOfSlice(shard::AllGatherOp gather) {
  auto slice = gather.getInput().getDefiningOp<shard::AllSliceOp>();
  if (!slice || slice.getGrid() != gather.getGrid() ||
      slice.getGridAxes() != gather.getGridAxes() ||
      slice.getSliceAxis() != gather.getGatherAxis() ||
      slice.getInput().getType() != gather.getType())
    return false;
  gather.getResult().replaceAllUsesWith(slice.getInput());
  gather.erase();
  if (slice->use_empty())
    slice.erase();
  return true;
}

struct SmpFuseBackwardPass
    : public smp::impl::SmpFuseBackwardPassBase<SmpFuseBackwardPass> {
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    llvm::SmallVector<ReduceSumOp> sums;
    f.walk([&](ReduceSumOp op) { sums.push_back(op); });
    for (ReduceSumOp op : sums)
      fuseBiasGeluGrad(op);
    DominanceInfo dom(f);
    llvm::SmallVector<AddOp> adds;
    f.walk([&](AddOp op) { adds.push_back(op); });
    for (AddOp op : adds)
      if (!fuseResidual<LayerNormGradOp>(op, dom))
        fuseResidual<RmsNormGradOp>(op, dom);
    llvm::SmallVector<shard::AllSliceOp> slices;
    f.walk([&](shard::AllSliceOp op) { slices.push_back(op); });
    for (shard::AllSliceOp op : slices)
      fuseReduceScatter(op);
    llvm::SmallVector<shard::AllGatherOp> gathers;
    f.walk([&](shard::AllGatherOp op) { gathers.push_back(op); });
    for (shard::AllGatherOp op : gathers)
      foldGatherOfSlice(op);
  }
};

} // namespace
