//===- MixedPrecision.cpp - Low-precision compute, fp32 master weights ----===//
//
// Implements `smp-mixed-precision`.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-mixed-precision"

namespace smp {
#define GEN_PASS_DEF_SMPMIXEDPRECISIONPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// `type` with f32 replaced by `low`, or null if it has no f32 elements.
RankedTensorType lowered(Type type, Type low) {
  auto t = dyn_cast<RankedTensorType>(type);
  if (!t || !t.getElementType().isF32())
    return {};
  return t.clone(low);
}

struct SmpMixedPrecisionPass
    : public smp::impl::SmpMixedPrecisionPassBase<SmpMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    MLIRContext *ctx = &getContext();
    Type low;
    if (precision == "bf16")
      low = BFloat16Type::get(ctx);
    else if (precision == "fp16")
      low = Float16Type::get(ctx);
    else {
      f.emitError() << "unknown precision '" << precision
                    << "' (expected bf16 or fp16)";
      return signalPassFailure();
    }
    Block &body = f.getBody().front();
    OpBuilder b(ctx);
    b.setInsertionPointToStart(&body);
    // f32 arguments: one cast down at the top.
    for (BlockArgument arg : body.getArguments()) {
      auto t = lowered(arg.getType(), low);
      if (!t || arg.use_empty())
        continue;
      auto cast = CastOp::create(b, arg.getLoc(), t, arg);
      arg.replaceAllUsesExcept(cast.getResult(), cast);
    }
    // Every f32 value computed inside becomes low precision.
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (isa<func::ReturnOp>(op))
        continue;
      if (auto constant = dyn_cast<ConstantOp>(op)) {
        auto t = lowered(constant.getType(), low);
        auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
        if (!t || !dense)
          continue;
        auto converted = dense.mapValues(low, [&](const APFloat &v) {
          APFloat c = v;
          bool loses;
          c.convert(cast<FloatType>(low).getFloatSemantics(),
                    APFloat::rmNearestTiesToEven, &loses);
          return c.bitcastToAPInt();
        });
        b.setInsertionPoint(&op);
        auto repl = ConstantOp::create(b, op.getLoc(), cast<TypedAttr>(converted));
        constant.replaceAllUsesWith(repl.getResult());
        constant.erase();
        continue;
      }
      if (auto c = dyn_cast<CastOp>(op))
        if (c.getInput().getType() == c.getType())
          continue;
      // Attention's log-sum-exp stays f32 whatever q's type (its contract).
      ValueRange results = op.getResults();
      if (auto attention = dyn_cast<AttentionOp>(op))
        results = attention->getResults().take_front(1);
      for (Value r : results)
        if (auto t = lowered(r.getType(), low))
          r.setType(t);
    }
    // Results go back to f32 (the loss is then computed in f32).
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    b.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Type expected = f.getResultTypes()[operand.getOperandNumber()];
      if (operand.get().getType() != expected)
        operand.set(CastOp::create(b, ret.getLoc(), expected, operand.get()));
    }
    // Casts that became no-ops (f32 -> f32 now low -> low) fold away.
    for (Operation &op : llvm::make_early_inc_range(body))
      if (auto c = dyn_cast<CastOp>(op))
        if (c.getInput().getType() == c.getType()) {
          c.replaceAllUsesWith(c.getInput());
          c.erase();
        }
  }
};

} // namespace
