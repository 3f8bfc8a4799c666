//===- FuseGradCasts.cpp - smp-fuse-grad-casts ----------------------------===//
//
// Implements `smp-fuse-grad-casts`: under bf16/f16 mixed precision every
// parameter's gradient comes out of the backward in 16 bits and is cast up
// to f32 for the gradient norm (smp.sum_squares) and the optimizer
// (smp.adam_update or smp.sgd_update of the f32 master weight). They read
// the 16-bit gradient instead, widening it as the cast did, so the f32 copy
// (4 bytes a parameter of arena) and its kernel go.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-fuse-grad-casts"

namespace smp {
#define GEN_PASS_DEF_SMPFUSEGRADCASTSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// Whether `use` reads its value widened when handed the 16-bit source: a
/// sum_squares input, or the gradient of an adam_update or sgd_update whose
/// parameter is f32 (of the cast's shape).
bool readsWidened(OpOperand &use) {
  Operation *user = use.getOwner();
  if (isa<SumSquaresOp>(user))
    return true;
  if (auto adam = dyn_cast<AdamUpdateOp>(user))
    return &use == &adam.getGradMutable() &&
           use.get().getType() == adam.getParam().getType();
  if (auto sgd = dyn_cast<SgdUpdateOp>(user))
    return &use == &sgd.getGradMutable() &&
           use.get().getType() == sgd.getParam().getType();
  return false;
}

/// cast(x: f16/bf16 -> f32) whose every use reads widened: the uses read x.
bool fuse(CastOp cast) {
  Type from = cast.getInput().getType().getElementType();
  if (!cast.getType().getElementType().isF32() ||
      !(from.isF16() || from.isBF16()) || cast.getResult().use_empty())
    return false;
  for (OpOperand &use : cast.getResult().getUses())
    if (!readsWidened(use))
      return false;
  cast.getResult().replaceAllUsesWith(cast.getInput());
  cast.erase();
  return true;
}

struct SmpFuseGradCastsPass
    : public smp::impl::SmpFuseGradCastsPassBase<SmpFuseGradCastsPass> {
  void runOnOperation() override {
    llvm::SmallVector<CastOp> casts;
    getOperation().walk([&](CastOp op) { casts.push_back(op); });
    for (CastOp op : casts)
      fuse(op);
  }
};

} // namespace
