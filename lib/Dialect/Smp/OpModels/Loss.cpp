//===- Loss.cpp - Op models of the losses
//-----------------------------------===//
//
// cross_entropy, cross_entropy_shard and their backward ops: gradients and
// costs; cross_entropy_with_grad (smp-fuse-loss-grad) and label_rank (an
// evaluation's accuracy, no gradient): their costs.
//
//===----------------------------------------------------------------------===//

#include "OpModelSupport.h"

using namespace mlir;
using namespace smp::autodiff;

namespace smp {

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

SMP_VJP(CrossEntropyOp) {
  gx[0] = CrossEntropyGradOp::create(
      b, op.getLoc(), op.getLogits(), op.getLabels(), op.getWeights(), gy[0],
      op.getIgnoreIndexAttr(), op.getReductionAttr(), op.getClassesAttr());
  return success();
}

/// The labels and the offset are integers: no gradient.
SMP_VJP(CrossEntropyShardOp) {
  gx[0] = CrossEntropyShardGradOp::create(
      b, op.getLoc(), op.getLogits(), op.getLabels(), op.getOffset(),
      op.getResult(), gy[0], op.getClassesAttr(), op.getIgnoreIndexAttr());
  return success();
}

namespace {

/// A few FLOPs per logit (max, exp, sum, log).
OpCost crossEntropyCost(Operation *op) {
  OpCost c = streaming(op, 0);
  c.flops = 6 * numel(op->getOperand(0));
  return c;
}

/// cross_entropy_with_grad: the loss's FLOPs and the gradient's (an exp
/// and a multiply-add per logit again); its bytes as streamed.
OpCost crossEntropyWithGradCost(Operation *op) {
  OpCost c = streaming(op, 0);
  c.flops = 9 * numel(op->getOperand(0));
  return c;
}

} // namespace

void registerLossOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, CrossEntropyOp, CrossEntropyShardOp>(ctx);
    attach<CostFn<crossEntropyCost>::Model, CrossEntropyOp, CrossEntropyGradOp,
           CrossEntropyShardOp, CrossEntropyShardGradOp, LabelRankOp>(ctx);
    attach<CostFn<crossEntropyWithGradCost>::Model, CrossEntropyWithGradOp>(
        ctx);
  });
}

} // namespace smp
