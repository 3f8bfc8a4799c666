//===- Norm.cpp - Op models of the normalisations ---------------------------===//
//
// layer_norm, rms_norm, batch_norm and their backward ops: gradients and
// costs. A tensor-parallel region ends at a normalisation (it reduces the
// hidden dimension tp would split).
//
//===----------------------------------------------------------------------===//

#include "OpModelSupport.h"

using namespace mlir;
using namespace smp::autodiff;

namespace smp {

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

SMP_VJP(LayerNormOp) {
  auto grads = LayerNormGradOp::create(b, op.getLoc(), op.getInput(),
                                       op.getScale(), gy[0], /*residual=*/Value(),
                                       op.getAxisAttr(),
                                       op.getEpsilonAttr());
  gx[0] = grads.getInputGrad();
  gx[1] = grads.getScaleGrad();
  if (op.getBias()) {
    Grad G{b, op.getLoc()};
    gx[2] = G.reshape(grads.getBiasGrad(), typeOf(op.getBias()).getShape());
  }
  return success();
}

SMP_VJP(RmsNormOp) {
  auto grads = RmsNormGradOp::create(b, op.getLoc(), op.getInput(),
                                     op.getScale(), gy[0],
                                     /*residual=*/Value(),
                                     op.getEpsilonAttr());
  gx[0] = grads.getInputGrad();
  gx[1] = grads.getScaleGrad();
  return success();
}

/// Batch norm: y = (x - mean) * inv * scale + bias, inv = rsqrt(var + eps),
/// per channel (dim 1). In inference the statistics are fixed; in training
/// they are the batch's (computed from x by ops before this one), so their
/// gradients carry the rest of the input's gradient:
/// d mean = -scale * inv * sum(g), d var = -scale * inv^2 / 2 * sum(g xhat).
SMP_VJP(BatchNormOp) {
  Grad G{b, op.getLoc()};
  Value x = op.getInput(), g = gy[0];
  auto t = typeOf(x);
  SmallVector<int64_t> chan(t.getRank(), 1);
  chan[1] = t.getDimSize(1);
  SmallVector<int64_t> others;
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (d != 1)
      others.push_back(d);
  ArrayRef<int64_t> perChannel = typeOf(op.getVariance()).getShape();
  Value eps = G.scalar(x, op.getEpsilon().convertToDouble());
  Value invC = RsqrtOp::create(b, op.getLoc(), G.add(op.getVariance(), eps));
  Value inv = G.reshape(invC, chan);
  Value xhat;
  if (need[1] || need[4])
    xhat = G.mul(G.sub(x, G.reshape(op.getMean(), chan)), inv);
  if (need[0])
    gx[0] = G.mul(g, G.mul(G.reshape(op.getScale(), chan), inv));
  Value gxhat; // sum(g * xhat) per channel
  if (need[1] || need[4])
    gxhat = G.sum(G.mul(g, xhat), others, /*keepdims=*/false);
  Value gsum; // sum(g) per channel
  if (need[2] || need[3])
    gsum = G.sum(g, others, /*keepdims=*/false);
  if (need[1])
    gx[1] = G.reshape(gxhat, typeOf(op.getScale()).getShape());
  if (need[2])
    gx[2] = G.reshape(gsum, typeOf(op.getBias()).getShape());
  Value scaleInv;
  if (need[3] || need[4])
    scaleInv = G.mul(G.reshape(op.getScale(), perChannel), invC);
  if (need[3])
    gx[3] = G.reshape(
        NegOp::create(b, op.getLoc(),
                      G.mul(scaleInv, G.reshape(gsum, perChannel))),
        typeOf(op.getMean()).getShape());
  if (need[4])
    gx[4] = G.mul(G.mul(scaleInv, G.mul(invC, G.scalar(invC, -0.5))),
                  G.reshape(gxhat, perChannel));
  return success();
}



void registerNormOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<GradientModel, LayerNormOp, RmsNormOp, BatchNormOp>(ctx);
    attach<CostFn<streamingCost<8>>::Model, LayerNormOp, BatchNormOp>(ctx);
    attach<CostFn<streamingCost<5>>::Model, RmsNormOp>(ctx);
    attach<CostFn<streamingCost<12>>::Model, LayerNormGradOp,
           RmsNormGradOp>(ctx);
  });
}

} // namespace smp
