//===- FuseMatMulBias.cpp - smp-fuse-matmul-bias --------------------------===//
//
// Implements `smp-fuse-matmul-bias`: a bias added to a product's rows,
// `add(bias, matmul(x, w))`, becomes one `smp.matmul_bias`, whose CUDA
// kernel adds the bias in cuBLASLt's epilogue instead of reading and writing
// the product once more (nn.Linear's forward, four times per transformer
// layer); with `addend`, a tensor of its type then added to it,
// `add(r, matmul_bias(x, w, b))`, becomes `smp.matmul_bias_add(x, w, b, r)`
// (and `add(r, matmul(x, w))` `smp.matmul_add(x, w, r)`), which cuBLASLt
// reads as C (a residual connection: two a GPT or LLaMA layer).
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-fuse-matmul-bias"

namespace smp {
#define GEN_PASS_DEF_SMPFUSEMATMULBIASPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// True when `bias` runs along the last dim of `product`: [N] or
/// [1, ..., 1, N] of the product's float element type and no higher rank
/// (adding it does not broadcast the product).
bool isRowBias(RankedTensorType bias, RankedTensorType product) {
  return isa<FloatType>(product.getElementType()) &&
         bias.getElementType() == product.getElementType() &&
         product.getRank() >= 1 &&
         isRowVector(bias.getShape(), product.getShape().back(),
                     product.getRank());
}

/// The add's result becomes `fused`'s (made at the add or at the product;
/// it takes the product's discardable attributes); the add and the product
/// `mm` go.
void replaceAddAndProduct(AddOp add, Operation *mm, Operation *fused) {
  fused->setDiscardableAttrs(mm->getDiscardableAttrDictionary());
  add.getResult().replaceAllUsesWith(fused->getResult(0));
  add.erase();
  mm->erase();
}

/// Whether `v` is defined before `op` (a block argument, or an op before it
/// in its block or in an enclosing one).
bool definedBefore(Value v, Operation *op) {
  Operation *def = v.getDefiningOp();
  return !def || def->getBlock() != op->getBlock() || def->isBeforeInBlock(op);
}

/// add(bias, matmul(x, w)) (either operand order) -> matmul_bias(x, w,
/// bias), where the product has no other use and a rhs of rank 2 or more.
/// At the product when the bias is made before it (a parameter always):
/// x and w then live no longer than they did; else at the add.
bool fuseMatMulBias(AddOp add) {
  for (auto [p, bias] : {std::pair(add.getRhs(), add.getLhs()),
                         std::pair(add.getLhs(), add.getRhs())}) {
    auto mm = p.getDefiningOp<MatMulOp>();
    if (!mm || !p.hasOneUse() || add.getType() != mm.getType() ||
        cast<RankedTensorType>(mm.getRhs().getType()).getRank() < 2 ||
        !isRowBias(cast<RankedTensorType>(bias.getType()),
                   cast<RankedTensorType>(mm.getType())))
      continue;
    OpBuilder b(definedBefore(bias, mm) ? mm.getOperation()
                                        : add.getOperation());
    auto fused = MatMulBiasOp::create(
        b, add.getLoc(), mm.getType(), mm.getLhs(), mm.getRhs(), bias,
        mm.getTransposeLhsAttr(), mm.getTransposeRhsAttr());
    replaceAddAndProduct(add, mm, fused);
    return true;
  }
  return false;
}

/// add(r, matmul_bias(x, w, b)) (either operand order) ->
/// matmul_bias_add(x, w, b, r), and add(r, matmul(x, w)) -> matmul_add(x,
/// w, r) for a float product with a rhs of rank 2 or more, where the
/// product has no other use, r has the product's type (no broadcast) and is
/// defined before the product, and the two ops are in one block with the
/// same annotations. At the product: its operands live no longer than they
/// did (at the add they would live until it: a tied embedding's gradient,
/// the LM head's weight gradient made at the backward's start plus the
/// gather's at its end, would keep the logits' gradient all through it).
bool fuseAddend(AddOp add) {
  for (auto [p, addend] : {std::pair(add.getRhs(), add.getLhs()),
                           std::pair(add.getLhs(), add.getRhs())}) {
    Operation *mm = p.getDefiningOp();
    if (!mm || !isa<MatMulOp, MatMulBiasOp>(mm) || !p.hasOneUse() ||
        add.getType() != p.getType() || addend.getType() != p.getType() ||
        mm->getBlock() != add->getBlock() || !sameAnnotations(mm, add) ||
        !definedBefore(addend, mm))
      continue;
    OpBuilder b(mm);
    if (auto withBias = dyn_cast<MatMulBiasOp>(mm)) {
      auto fused = MatMulBiasAddOp::create(
          b, add.getLoc(), p.getType(), withBias.getLhs(), withBias.getRhs(),
          withBias.getBias(), addend, withBias.getTransposeLhsAttr(),
          withBias.getTransposeRhsAttr());
      replaceAddAndProduct(add, mm, fused);
      return true;
    }
    auto plain = cast<MatMulOp>(mm);
    if (!isa<FloatType>(cast<RankedTensorType>(p.getType()).getElementType()) ||
        cast<RankedTensorType>(plain.getRhs().getType()).getRank() < 2)
      continue;
    auto fused = MatMulAddOp::create(
        b, add.getLoc(), p.getType(), plain.getLhs(), plain.getRhs(), addend,
        plain.getTransposeLhsAttr(), plain.getTransposeRhsAttr());
    replaceAddAndProduct(add, mm, fused);
    return true;
  }
  return false;
}

struct SmpFuseMatMulBiasPass
    : public smp::impl::SmpFuseMatMulBiasPassBase<SmpFuseMatMulBiasPass> {
  using SmpFuseMatMulBiasPassBase::SmpFuseMatMulBiasPassBase;
  void runOnOperation() override {
    llvm::SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp op) { adds.push_back(op); });
    llvm::SmallVector<AddOp> rest;
    for (AddOp op : adds)
      if (!fuseMatMulBias(op))
        rest.push_back(op);
    if (addend)
      for (AddOp op : rest)
        fuseAddend(op);
  }
};

} // namespace
