//===- Loss.cpp - Op models of the losses -----------------------------------===//
//
// cross_entropy and its backward op: gradient and costs.
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

namespace {

/// A few FLOPs per logit (max, exp, sum, log).
OpCost crossEntropyCost(Operation *op) {
  OpCost c = streaming(op, 0);
  c.flops = 6 * numel(op->getOperand(0));
  return c;
}

} // namespace

void registerLossOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, CrossEntropyOp>(ctx);
    attach<CostFn<crossEntropyCost>::Model, CrossEntropyOp,
           CrossEntropyGradOp>(ctx);
  });
}

} // namespace smp
