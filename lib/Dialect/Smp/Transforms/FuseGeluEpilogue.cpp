//===- FuseGeluEpilogue.cpp - smp-fuse-gelu-epilogue ----------------------===//
//
// Implements `smp-fuse-gelu-epilogue`: the GELU after a product (and, with
// `backward`, its gradient before one) move into the products, where
// cuBLASLt's epilogues compute them (CUBLASLT_EPILOGUE_GELU_AUX_BIAS
// forward, CUBLASLT_EPILOGUE_DGELU_BGRAD backward) instead of separate
// kernels that read and write the product again:
//
//   gelu(matmul_bias(x, w, b)) {tanh}          -> matmul_bias_gelu(x, w, b)
//   bias_gelu_grad(p, matmul(g, v)) {tanh}     -> matmul_gelu_grad(g, v, p)
//
// The backward is off by default (smpc --dgelu-epilogue): on an H200,
// cuBLASLt ran GPT-2's DGELU_BGRAD products at 166 TFLOP/s, a third of the
// plain products' rate, which bias_gelu_grad's one vector pass after a
// plain product is predicted to beat (docs/benchmarks.md).
//
// f16/bf16 only: the epilogue's GELU is the tanh form and is computed on the
// f32 product before the result is rounded, which a 16-bit result cannot
// tell from the separate kernels (an f32 model keeps the kernels whose bits
// the CPU backend reproduces).
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-fuse-gelu-epilogue"

namespace smp {
#define GEN_PASS_DEF_SMPFUSEGELUEPILOGUEPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

bool isHalf(Type t) {
  Type e = cast<RankedTensorType>(t).getElementType();
  return e.isF16() || e.isBF16();
}

/// gelu(matmul_bias) {tanh} -> matmul_bias_gelu; every other reader of the
/// product (the backward's gradient, a recomputation) reads its
/// preactivation result.
bool fuseForward(MatMulBiasOp mm) {
  if (!isHalf(mm.getType()))
    return false;
  SmallVector<GeluOp> gelus;
  for (Operation *user : mm.getResult().getUsers())
    if (auto gelu = dyn_cast<GeluOp>(user))
      if (gelu.getApproximate() == GeluApproximation::tanh &&
          sameAnnotations(gelu, mm))
        gelus.push_back(gelu);
  if (gelus.empty())
    return false;
  // At the product: its readers all come after it.
  OpBuilder b(mm);
  auto fused = MatMulBiasGeluOp::create(
      b, mm.getLoc(), mm.getLhs(), mm.getRhs(), mm.getBias(),
      mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr());
  fused->setDiscardableAttrs(mm->getDiscardableAttrDictionary());
  for (GeluOp gelu : gelus) {
    gelu.getResult().replaceAllUsesWith(fused.getResult());
    gelu.erase();
  }
  mm.getResult().replaceAllUsesWith(fused.getPreactivation());
  mm.erase();
  return true;
}

/// bias_gelu_grad(p, matmul(g, v)) {tanh} -> matmul_gelu_grad(g, v, p),
/// where the product has no other reader.
bool fuseBackward(BiasGeluGradOp grad) {
  auto mm = grad.getGrad().getDefiningOp<MatMulOp>();
  if (!mm || !mm.getResult().hasOneUse() ||
      grad.getApproximate() != GeluApproximation::tanh ||
      !isHalf(grad.getInput().getType()) || !sameAnnotations(grad, mm) ||
      cast<RankedTensorType>(mm.getRhs().getType()).getRank() < 2)
    return false;
  // At the gradient: the preactivation may be defined after the product.
  OpBuilder b(grad);
  auto fused = MatMulGeluGradOp::create(
      b, grad.getLoc(),
      TypeRange{grad.getInputGrad().getType(), grad.getBiasGrad().getType()},
      mm.getLhs(), mm.getRhs(), grad.getInput(), mm.getTransposeLhsAttr(),
      mm.getTransposeRhsAttr());
  fused->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
  grad.getInputGrad().replaceAllUsesWith(fused.getInputGrad());
  grad.getBiasGrad().replaceAllUsesWith(fused.getBiasGrad());
  grad.erase();
  mm.erase();
  return true;
}

struct SmpFuseGeluEpiloguePass
    : public smp::impl::SmpFuseGeluEpiloguePassBase<SmpFuseGeluEpiloguePass> {
  using SmpFuseGeluEpiloguePassBase::SmpFuseGeluEpiloguePassBase;
  void runOnOperation() override {
    SmallVector<MatMulBiasOp> products;
    SmallVector<BiasGeluGradOp> grads;
    getOperation().walk([&](Operation *op) {
      if (auto mm = dyn_cast<MatMulBiasOp>(op))
        products.push_back(mm);
      else if (auto grad = dyn_cast<BiasGeluGradOp>(op); grad && backward)
        grads.push_back(grad);
    });
    for (MatMulBiasOp mm : products)
      fuseForward(mm);
    for (BiasGeluGradOp grad : grads)
      fuseBackward(grad);
  }
};

} // namespace
