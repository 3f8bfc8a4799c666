//===- Gather.cpp - Op models of the gathers --------------------------------===//
//
// gather (embedding lookups), gather_nd, gather_elements and their backward
// scatter-adds: gradients and costs. Tensor parallelism splits an embedding
// table by rows with its own rewrite (TensorParallel.cpp, vocab-parallel),
// not with a sharding rule.
//
//===----------------------------------------------------------------------===//

#include "OpModelSupport.h"

using namespace mlir;
using namespace smp::autodiff;

namespace smp {

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

SMP_VJP(GatherOp) {
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

SMP_VJP(GatherNdOp) {
  if (need[0])
    gx[0] = GatherNdGradOp::create(b, op.getLoc(), op.getData().getType(),
                                   op.getIndices(), gy[0],
                                   op.getBatchDimsAttr());
  return success();
}

SMP_VJP(GatherElementsOp) {
  if (need[0])
    gx[0] = GatherElementsGradOp::create(b, op.getLoc(),
                                         op.getData().getType(),
                                         op.getIndices(), gy[0],
                                         op.getAxisAttr());
  return success();
}

/// gather_elements_grad scatter-adds `grad` at `indices`: linear in `grad`,
/// whose gradient gathers the upstream gradient back at the same indices
/// (ONNX ScatterElements is imported as it).
SMP_VJP(GatherElementsGradOp) {
  if (need[1])
    gx[1] = GatherElementsOp::create(b, op.getLoc(), op.getGrad().getType(),
                                     gy[0], op.getIndices(), op.getAxisAttr());
  return success();
}

namespace {

/// Reads the elements it returns and the indices.
OpCost gatherCost(Operation *op) {
  OpCost c;
  c.bytesRead = tensorBytes(op->getResult(0)) + tensorBytes(op->getOperand(1));
  c.bytesWritten = tensorBytes(op->getResult(0));
  return c;
}

/// Writes the whole table; one addition per scattered element.
OpCost scatterCost(Operation *op) {
  OpCost c = streaming(op, 0);
  c.flops = numel(op->getOperand(1));
  return c;
}

} // namespace

void registerGatherOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, GatherOp, GatherNdOp, GatherElementsOp,
           GatherElementsGradOp>(ctx);
    attach<CostFn<gatherCost>::Model, GatherOp, GatherNdOp,
           GatherElementsOp>(ctx);
    attach<CostFn<scatterCost>::Model, GatherGradOp, GatherNdGradOp,
           GatherElementsGradOp>(ctx);
  });
}

} // namespace smp
