//===- Communication.cpp - Op models of communication and offloading ------===//
//
// Pipeline send/recv, the tensor-parallel tp_copy and tp_rank, activation
// offload/prefetch, and the upstream shard dialect's collectives:
// gradients and costs.
//
//===----------------------------------------------------------------------===//

#include "OpModelSupport.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;

namespace smp {

/// smp.tp_copy: the gradient summed over the tensor-parallel ranks.
SMP_VJP(TpCopyOp) {
  if (gy[0])
    gx[0] = shard::AllReduceOp::create(b, op->getLoc(), gy[0], "tp",
                                       ArrayRef<shard::GridAxis>{0},
                                       shard::ReductionKind::Sum);
  return success();
}

/// shard.all_reduce (a sum whose result every rank uses as the same value,
/// e.g. a row-parallel layer's output): the gradient passes unchanged, as
/// every tensor-parallel rank differentiates the same loss. On the
/// data-parallel grid `@dp` each rank differentiates its own share of the
/// loss (synchronised batch-norm statistics), so the gradient of the shared
/// sum is the sum of the ranks' gradients: an all_reduce again. A max over
/// the ranks is only ever the shift that keeps a vocab-parallel softmax
/// finite, to which the loss is invariant: it gets no gradient.
namespace {
struct AllReduceGradient
    : public AutodiffOpInterface::ExternalModel<AllReduceGradient,
                                                shard::AllReduceOp> {
  LogicalResult buildVJP(Operation *op, OpBuilder &b, ArrayRef<Value> gy,
                         ArrayRef<bool> need,
                         SmallVectorImpl<Value> &gx) const {
    auto reduce = cast<shard::AllReduceOp>(op);
    gx.assign(1, Value());
    if (reduce.getReduction() == shard::ReductionKind::Max)
      return success(); // a shift (the softmax's max): no gradient flows
    if (reduce.getReduction() != shard::ReductionKind::Sum)
      return op->emitOpError("has no gradient (only sums and maxima do)");
    gx[0] = reduce.getGrid() == "dp"
                ? Value(shard::AllReduceOp::create(
                      b, op->getLoc(), gy[0], "dp", reduce.getGridAxes(),
                      shard::ReductionKind::Sum))
                : gy[0];
    return success();
  }
};

/// The collectives that move rows of a value between the tensor-parallel
/// ranks (smp-sequence-parallel, along dim 0): all_gather (every rank then
/// uses the same whole value, so its gradient is the same on every rank:
/// this rank takes its rows), all_slice (of a value every rank holds whole:
/// the rows' gradients gathered whole) and reduce_scatter (of partial sums:
/// each rank's partial gets the whole gradient, gathered). Only on @tp: the
/// data-parallel ones are built after autodiff.
template <typename Op>
struct RowsGradient
    : public AutodiffOpInterface::ExternalModel<RowsGradient<Op>, Op> {
  LogicalResult buildVJP(Operation *op, OpBuilder &b, ArrayRef<Value> gy,
                         ArrayRef<bool>, SmallVectorImpl<Value> &gx) const {
    gx.assign(1, Value());
    auto c = cast<Op>(op);
    int64_t axis;
    if constexpr (std::is_same_v<Op, shard::AllGatherOp>)
      axis = c.getGatherAxis().getSExtValue();
    else if constexpr (std::is_same_v<Op, shard::AllSliceOp>)
      axis = c.getSliceAxis().getSExtValue();
    else
      axis = c.getReduction() == shard::ReductionKind::Sum
                 ? c.getScatterAxis().getSExtValue()
                 : -1;
    if (c.getGrid() != "tp" || axis != 0)
      return op->emitOpError("has no gradient (only a sum or a collective "
                             "along dim 0 of @tp has one)");
    if (!gy[0])
      return success();
    auto inType = cast<RankedTensorType>(op->getOperand(0).getType());
    if constexpr (std::is_same_v<Op, shard::AllGatherOp>)
      gx[0] = shard::AllSliceOp::create(b, op->getLoc(), inType, gy[0], "tp",
                                        c.getGridAxes(), 0);
    else
      gx[0] = shard::AllGatherOp::create(
          b, op->getLoc(), inType,
          FlatSymbolRefAttr::get(b.getContext(), "tp"),
          b.getDenseI16ArrayAttr(c.getGridAxes()), gy[0], b.getIndexAttr(0));
    return success();
  }
};
} // namespace

void registerCommunicationOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, TpCopyOp>(ctx);
    // all_slice_multi: as shard.all_slice (below), a copy of chunks.
    attach<NoCost, TpCopyOp, TpRankOp, SendOp, RecvOp, AllSliceMultiOp>(ctx);
    attach<Streaming1, OffloadOp, PrefetchOp>(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllReduceOp::attachInterface<AllReduceGradient>(*ctx);
    shard::AllGatherOp::attachInterface<RowsGradient<shard::AllGatherOp>>(*ctx);
    shard::AllSliceOp::attachInterface<RowsGradient<shard::AllSliceOp>>(*ctx);
    shard::ReduceScatterOp::attachInterface<
        RowsGradient<shard::ReduceScatterOp>>(*ctx);
    // The transfer is timed by the communication model; on the device
    // they only stream their buffers.
    attach<NoCost, shard::AllReduceOp, shard::AllGatherOp,
           shard::ReduceScatterOp, shard::AllSliceOp>(ctx);
  });
}

} // namespace smp
