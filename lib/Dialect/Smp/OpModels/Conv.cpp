//===- Conv.cpp - Op models of convolution and pooling
//----------------------===//
//
// conv, max_pool, avg_pool and their backward ops: gradients and costs.
// conv_grad has a gradient too: its input gradient is ONNX ConvTranspose.
//
//===----------------------------------------------------------------------===//

#include "OpModelSupport.h"

using namespace mlir;
using namespace smp::autodiff;

namespace smp {

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

SMP_VJP(ConvOp) {
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

/// conv_grad's input gradient is linear in `grad` and in `weight`: a
/// transposed convolution (ONNX ConvTranspose is imported as one, `input`
/// giving only the output's shape). Its gradient with respect to `grad` is
/// the convolution of the upstream gradient, with respect to `weight` that
/// convolution's weight gradient; `input`'s values do not matter. A
/// gradient through `weight_grad` (a second derivative) is refused.
SMP_VJP(ConvGradOp) {
  if (gy.size() > 1 && gy[1])
    return op.emitError("no gradient through smp.conv_grad's weight_grad "
                        "(second derivatives are not supported)");
  if (!gy[0])
    return success();
  if (need[2])
    gx[2] = ConvOp::create(b, op.getLoc(), op.getGrad().getType(), gy[0],
                           op.getWeight(), Value(), op.getStridesAttr(),
                           op.getPadsAttr(), op.getDilationsAttr(),
                           op.getGroupAttr());
  if (need[1])
    gx[1] = ConvGradOp::create(
                b, op.getLoc(), gy[0].getType(), op.getWeight().getType(),
                gy[0], op.getWeight(), op.getGrad(), op.getStridesAttr(),
                op.getPadsAttr(), op.getDilationsAttr(), op.getGroupAttr())
                .getWeightGrad();
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
SMP_VJP(MaxPoolOp) { return vjpPool(op, "max", b, gy, gx); }
SMP_VJP(AvgPoolOp) { return vjpPool(op, "avg", b, gy, gx); }

namespace {

double convFlops(Value output, Value weight) {
  auto w = cast<RankedTensorType>(weight.getType());
  return 2.0 * numel(output) *
         (static_cast<double>(w.getNumElements()) / w.getDimSize(0));
}

OpCost convCost(Operation *op) {
  auto conv = cast<ConvOp>(op);
  OpCost c = streaming(conv, 0);
  c.flops = convFlops(conv.getResult(), conv.getWeight());
  c.matrix = true;
  return c;
}

/// The input and the weight gradient: two convolutions' work.
OpCost convGradCost(Operation *op) {
  OpCost c = streaming(op, 0);
  c.flops = 2 * convFlops(op->getOperand(2), op->getOperand(1));
  c.matrix = true;
  return c;
}

} // namespace

void registerConvOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, ConvOp, ConvGradOp, MaxPoolOp, AvgPoolOp>(ctx);
    attach<CostFn<convCost>::Model, ConvOp>(ctx);
    attach<CostFn<convGradCost>::Model, ConvGradOp>(ctx);
    attach<Streaming1, MaxPoolOp, AvgPoolOp, PoolGradOp>(ctx);
  });
}

} // namespace smp
