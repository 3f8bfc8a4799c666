//===- OpCosts.cpp - CostOpInterface for the smp dialect ------------------===//
//
// FLOPs count a multiply-add as two. Bytes are the operands read and the
// results written once each, except where an op touches less (a gather
// reads the rows it returns, a reshape is free) or more (a gather's
// gradient writes the whole table). Transcendental functions count as a few
// FLOPs each; on a GPU these ops are bandwidth-bound anyway.
//
//===----------------------------------------------------------------------===//

#include "smp/Analysis/Cost/OpCosts.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace smp {
namespace {

double numel(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.hasStaticShape() ? static_cast<double>(t.getNumElements()) : 0;
}

double bytesOf(Value v) { return tensorBytes(v); }

/// Operands read and results written once each; `perElement` FLOPs per
/// result element.
OpCost streaming(Operation *op, double perElement) {
  OpCost c;
  for (Value v : op->getOperands())
    c.bytesRead += bytesOf(v);
  for (Value v : op->getResults()) {
    c.bytesWritten += bytesOf(v);
    c.flops += perElement * numel(v);
  }
  return c;
}

double matmulFlops(MatMulOp mm) {
  auto lhs = cast<RankedTensorType>(mm.getLhs().getType());
  int64_t k = lhs.getRank() == 1
                  ? lhs.getDimSize(0)
                  : lhs.getDimSize(mm.getTransposeLhs() ? lhs.getRank() - 2
                                                        : lhs.getRank() - 1);
  return 2.0 * numel(mm.getResult()) * static_cast<double>(k);
}

double convFlops(Value output, Value weight) {
  auto w = cast<RankedTensorType>(weight.getType());
  return 2.0 * numel(output) *
         (static_cast<double>(w.getNumElements()) / w.getDimSize(0));
}

OpCost computeCost(Operation *op) {
  return llvm::TypeSwitch<Operation *, OpCost>(op)
      .Case<ConstantOp, ReshapeOp, TpCopyOp, TpRankOp, SendOp, RecvOp>(
          [](Operation *) { return OpCost(); })
      .Case<MatMulOp>([](MatMulOp mm) {
        OpCost c = streaming(mm, 0);
        c.flops = matmulFlops(mm);
        c.matrix = true;
        return c;
      })
      .Case<ConvOp>([](ConvOp conv) {
        OpCost c = streaming(conv, 0);
        c.flops = convFlops(conv.getResult(), conv.getWeight());
        c.matrix = true;
        return c;
      })
      .Case<ConvGradOp>([](ConvGradOp g) {
        // The input and the weight gradient: two convolutions' work.
        OpCost c = streaming(g, 0);
        c.flops = 2 * convFlops(g->getOperand(2), g->getOperand(1));
        c.matrix = true;
        return c;
      })
      .Case<GatherOp, GatherNdOp, GatherElementsOp>([](Operation *g) {
        // Reads the elements it returns and the indices.
        OpCost c;
        c.bytesRead = bytesOf(g->getResult(0)) + bytesOf(g->getOperand(1));
        c.bytesWritten = bytesOf(g->getResult(0));
        return c;
      })
      .Case<GatherGradOp, GatherNdGradOp, GatherElementsGradOp>(
          [](Operation *g) {
        OpCost c = streaming(g, 0);
        c.flops = numel(g->getOperand(1)); // the scattered additions
        return c;
      })
      .Case<ExpOp, LogOp, SqrtOp, RsqrtOp, ReciprocalOp, SigmoidOp, TanhOp,
            ErfOp, SinOp, CosOp, PowOp>(
          [](Operation *o) { return streaming(o, 4); })
      .Case<GeluOp, SiluOp, LeakyReluOp>(
          [](Operation *o) { return streaming(o, 8); })
      .Case<GeluGradOp>([](Operation *o) { return streaming(o, 12); })
      .Case<SoftmaxOp, LogSoftmaxOp>(
          [](Operation *o) { return streaming(o, 5); })
      .Case<LayerNormOp, BatchNormOp>([](Operation *o) { return streaming(o, 8); })
      .Case<RmsNormOp>([](Operation *o) { return streaming(o, 5); })
      .Case<LayerNormGradOp, RmsNormGradOp>(
          [](Operation *o) { return streaming(o, 12); })
      .Case<CrossEntropyOp, CrossEntropyGradOp>([](Operation *o) {
        OpCost c = streaming(o, 0);
        c.flops = 6 * numel(o->getOperand(0)); // over the logits
        return c;
      })
      .Case<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>([](Operation *o) {
        OpCost c = streaming(o, 0);
        c.flops = numel(o->getOperand(0));
        return c;
      })
      .Case<SgdUpdateOp>([](Operation *o) { return streaming(o, 3); })
      .Case<AdamUpdateOp>([](Operation *o) { return streaming(o, 5); })
      .Case<TransposeOp, SliceOp, ConcatOp, SplitOp, ExpandOp, SliceGradOp>(
          [](Operation *o) { return streaming(o, 0); })
      .Default([](Operation *o) { return streaming(o, 1); });
}

template <typename OpT>
struct CostModel
    : public CostOpInterface::ExternalModel<CostModel<OpT>, OpT> {
  OpCost getCost(Operation *op) const { return computeCost(op); }
};

/// Collectives: their transfer is timed by the communication model; on the
/// device they only stream their buffers.
template <typename OpT>
struct CollectiveCost
    : public CostOpInterface::ExternalModel<CollectiveCost<OpT>, OpT> {
  OpCost getCost(Operation *op) const { return OpCost(); }
};

template <typename... Ops> void attachAll(MLIRContext *ctx) {
  (Ops::template attachInterface<CostModel<Ops>>(*ctx), ...);
}

} // namespace

void registerCostExternalModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attachAll<
#define GET_OP_LIST
#include "smp/Dialect/Smp/IR/SmpOps.cpp.inc"
        >(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllReduceOp::attachInterface<CollectiveCost<shard::AllReduceOp>>(*ctx);
    shard::AllGatherOp::attachInterface<CollectiveCost<shard::AllGatherOp>>(*ctx);
    shard::ReduceScatterOp::attachInterface<
        CollectiveCost<shard::ReduceScatterOp>>(*ctx);
    shard::AllSliceOp::attachInterface<CollectiveCost<shard::AllSliceOp>>(*ctx);
  });
}

double tensorBytes(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return 0;
  return static_cast<double>(t.getNumElements()) *
         std::max(1u, t.getElementTypeBitWidth() / 8);
}

OpCost costOf(Operation *op) {
  if (auto iface = dyn_cast<CostOpInterface>(op))
    return iface.getCost();
  return OpCost();
}

} // namespace smp
