//===- FuseBiasGrad.cpp - smp-fuse-bias-grad ------------------------------===//
//
// Implements `smp-fuse-bias-grad`: a linear layer's bias gradient, the sum
// of its output gradient g over the tokens, moves into the weight
// gradient's product, which reads g anyway (cuBLASLt's
// CUBLASLT_EPILOGUE_BGRADB):
//
//   db = reduce_sum(g) {leading dims}
//   dw = matmul(reshape(g) [M, N], x [M, K]) {transpose_lhs}
//     -> dw, db = matmul_bias_grad(reshape(g), x)
//
// f16/bf16 only, as the GELU epilogues (smp-fuse-gelu-epilogue).
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dominance.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-fuse-bias-grad"

namespace smp {
#define GEN_PASS_DEF_SMPFUSEBIASGRADPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// `v`, `g` or a reshape of it, is [rows, N]: g's tokens folded.
bool foldsRowsOf(Value v, Value g) {
  ArrayRef<int64_t> gs = shapeOf(g), vs = shapeOf(v);
  return vs.size() == 2 && !gs.empty() && vs[1] == gs.back() &&
         vs[0] * vs[1] == cast<RankedTensorType>(g.getType()).getNumElements();
}

/// The weight gradient's product reading `g`'s rows as its transposed lhs,
/// with the sum's annotations; null if none.
MatMulOp weightGradOf(ReduceSumOp sum) {
  Value g = sum.getInput();
  SmallVector<Value> views{g};
  for (Operation *user : g.getUsers())
    if (auto reshape = dyn_cast<ReshapeOp>(user))
      views.push_back(reshape.getResult());
  for (Value v : views)
    for (Operation *user : v.getUsers()) {
      auto mm = dyn_cast<MatMulOp>(user);
      if (mm && mm.getLhs() == v && mm.getTransposeLhs() &&
          !mm.getTransposeRhs() && foldsRowsOf(v, g) &&
          shapeOf(mm.getRhs()).size() == 2 && sameAnnotations(mm, sum))
        return mm;
    }
  return nullptr;
}

/// `v` can be read at `at`: it is defined before, or it reshapes a value
/// that is (and can be made again there).
bool readableAt(Value v, Operation *at, DominanceInfo &dom) {
  if (dom.properlyDominates(v, at))
    return true;
  auto reshape = v.getDefiningOp<ReshapeOp>();
  return reshape && dom.properlyDominates(reshape.getInput(), at);
}

/// `v` at `at` (readableAt): itself, or its reshape made again there with
/// its annotations.
Value at(Value v, Operation *op, DominanceInfo &dom, OpBuilder &b) {
  if (dom.properlyDominates(v, op))
    return v;
  auto reshape = v.getDefiningOp<ReshapeOp>();
  auto again =
      ReshapeOp::create(b, reshape.getLoc(), v.getType(), reshape.getInput());
  again->setDiscardableAttrs(reshape->getDiscardableAttrDictionary());
  return again;
}

/// reduce_sum(g) over its leading dims, with a weight gradient's product of
/// g's rows in the same block -> matmul_bias_grad at the earlier of the two
/// (the operands defined before it, or reshapes of values that are, made
/// again there).
bool fuse(ReduceSumOp sum, DominanceInfo &dom) {
  Value g = sum.getInput();
  auto type = cast<RankedTensorType>(g.getType());
  Type e = type.getElementType();
  if ((!e.isF16() && !e.isBF16()) || type.getRank() < 1 ||
      !reducesLeadingDims(sum.getAxes(), type.getRank()))
    return false;
  MatMulOp mm = weightGradOf(sum);
  if (!mm || mm->getBlock() != sum->getBlock())
    return false;
  Operation *first = sum->isBeforeInBlock(mm) ? sum.getOperation() : mm;
  Value view = mm.getLhs(), rhsView = mm.getRhs();
  if (!readableAt(view, first, dom) || !readableAt(rhsView, first, dom))
    return false; // the layer's input comes between them
  OpBuilder b(first);
  Value lhs = at(view, first, dom, b), rhs = at(rhsView, first, dom, b);
  auto fused = MatMulBiasGradOp::create(
      b, mm.getLoc(), TypeRange{mm.getType(), sum.getType()}, lhs, rhs);
  fused->setDiscardableAttrs(mm->getDiscardableAttrDictionary());
  mm.getResult().replaceAllUsesWith(fused.getResult());
  sum.getResult().replaceAllUsesWith(fused.getBiasGrad());
  mm.erase();
  sum.erase();
  for (Value v : {view, rhsView})
    if (v != lhs && v != rhs && v.use_empty())
      v.getDefiningOp()->erase();
  return true;
}

struct SmpFuseBiasGradPass
    : public smp::impl::SmpFuseBiasGradPassBase<SmpFuseBiasGradPass> {
  void runOnOperation() override {
    SmallVector<ReduceSumOp> sums;
    getOperation().walk([&](ReduceSumOp op) { sums.push_back(op); });
    DominanceInfo dom(getOperation());
    for (ReduceSumOp sum : sums)
      fuse(sum, dom);
  }
};

} // namespace
