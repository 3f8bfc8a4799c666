//===- LossScaling.cpp - smp-loss-scaling ---------------------------------===//
//
// Implements `smp-loss-scaling`: dynamic loss scaling (torch.amp.GradScaler)
// after the backward, which smp-build-gradients seeded with the loss times
// the state @loss_scale.
//
//===----------------------------------------------------------------------===//

#include "TrainStepContract.h"
#include "TrainStepUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-loss-scaling"

namespace smp {
#define GEN_PASS_DEF_SMPLOSSSCALINGPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpLossScalingPass
    : public smp::impl::SmpLossScalingPassBase<SmpLossScalingPass> {
  using Base::Base;

  /// The state @loss_scale, if the backward was seeded with it.
  static Value lossScaleState(func::FuncOp f) {
    for (BlockArgument arg : f.getArguments())
      if (auto s = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                  SmpDialect::kStateAttr);
          s && s.getValue() == kLossScaleState)
        return arg;
    return Value();
  }

  /// Divides every gradient by `scale`; returns whether any of them holds
  /// an inf or NaN (an i1 scalar, the same on every rank).
  Value unscale(func::FuncOp f, OpBuilder &b, Value scale) {
    Location loc = f.getLoc();
    Type f32 = b.getF32Type();
    // Any inf or NaN gradient makes sum(g * 0) NaN.
    Value total;
    bool zero = false;
    for (const Gradient &grad : gradients(f)) {
      Value g = grad.value;
      zero |= grad.sharded;
      auto t = cast<RankedTensorType>(g.getType());
      Value z = reduceAll<ReduceSumOp>(
          b, loc,
          MulOp::create(b, loc, toF32(b, loc, g), scalarConst(b, loc, f32, 0.0)));
      total = total ? Value(AddOp::create(b, loc, total, z)) : z;
      Value inv = DivOp::create(b, loc, scalarConst(b, loc, f32, 1.0), scale);
      if (t.getElementType() != f32)
        inv = CastOp::create(b, loc, RankedTensorType::get({}, t.getElementType()), inv);
      setResult(f, grad.result, MulOp::create(b, loc, g, inv));
    }
    // ZeRO-1: each rank checked its shards only; an overflow anywhere
    // (a NaN in any rank's sum) skips the step on every rank.
    if (zero && total)
      total = allReduceDp(b, loc, total);
    return total ? Value(NotOp::create(b, loc, EqualOp::create(b, loc, total, total)))
                 : Value(ConstantOp::create(
                       b, loc, DenseElementsAttr::get(
                                   RankedTensorType::get({}, b.getI1Type()), false)));
  }

  /// DeepSpeed's hysteresis: an overflow halves the scale only once
  /// `hysteresis` overflows were seen since the count was last reset (at a
  /// growth of the scale, or with consecutive-hysteresis at any good step);
  /// until then it only skips the step. The count is the state
  /// @loss_scale_overflows (capped at hysteresis - 1, as DeepSpeed's
  /// countdown stops at 1).
  /// Returns whether the scale halves and the count's next value.
  std::pair<Value, Value> hysteresisHalves(func::FuncOp f, OpBuilder &b,
                                           Value found, Value grow) {
    Location loc = f.getLoc();
    Type f32 = b.getF32Type();
    Value seen =
        addState(f, RankedTensorType::get({}, f32), "@loss_scale_overflows");
    Value last = GreaterOp::create(b, loc, seen,
                                   scalarConst(b, loc, f32, hysteresis - 1.5));
    Value halve = AndOp::create(b, loc, found, last);
    Value counted = WhereOp::create(
        b, loc, last, seen,
        AddOp::create(b, loc, seen, scalarConst(b, loc, f32, 1.0)));
    Value good = NotOp::create(b, loc, found);
    Value reset =
        consecutiveHysteresis ? good : Value(AndOp::create(b, loc, good, grow));
    Value next = WhereOp::create(
        b, loc, found, counted,
        WhereOp::create(b, loc, reset, scalarConst(b, loc, f32, 0.0), seen));
    return {halve, next};
  }

  void runOnOperation() override {
    auto f = trainStep(getOperation(), "smp-loss-scaling");
    if (failed(f))
      return signalPassFailure();
    Value scale = lossScaleState(*f);
    if (!scale) {
      f->emitError() << "smp-loss-scaling: the step has no state @loss_scale "
                        "(smp-build-gradients{loss-scaling=true} seeds the "
                        "backward with it)";
      return signalPassFailure();
    }
    OpBuilder b(f->getBody().front().getTerminator());
    Location loc = f->getLoc();
    MLIRContext *ctx = &getContext();
    Type f32 = b.getF32Type();
    Type scalarF32 = RankedTensorType::get({}, f32);
    Value found = unscale(*f, b, scale);
    // Halve the scale after an overflow; double it after growth-interval
    // good steps in a row. DeepSpeed's count (stable_interval) waits one
    // good step more after an overflow or the start: the tracker then
    // restarts at 1 after a growth, at 0 after an overflow.
    Value one = scalarConst(b, loc, f32, 1.0), zero = scalarConst(b, loc, f32, 0.0);
    double delay = deepspeedWindow ? 1.0 : 0.0;
    Value tracker = addState(*f, scalarF32, "@growth_tracker");
    Value nextTracker = AddOp::create(b, loc, tracker, one);
    Value grow = Value(GreaterOp::create(
        b, loc, nextTracker,
        scalarConst(b, loc, f32, growthInterval + delay - 0.5)));
    Value grown = WhereOp::create(
        b, loc, grow, MulOp::create(b, loc, scale, scalarConst(b, loc, f32, 2.0)),
        scale);
    Value halved = MulOp::create(b, loc, scale, scalarConst(b, loc, f32, 0.5));
    if (minScale > 0)
      halved =
          MaxOp::create(b, loc, halved, scalarConst(b, loc, f32, minScale));
    Value halve = found, overflows;
    if (hysteresis > 1)
      std::tie(halve, overflows) = hysteresisHalves(*f, b, found, grow);
    // With hysteresis an overflow may leave the scale as it is.
    Value newScale =
        overflows
            ? WhereOp::create(b, loc, halve, halved,
                              WhereOp::create(b, loc, found, scale, grown))
            : WhereOp::create(b, loc, found, halved, grown);
    Value newTracker = WhereOp::create(
        b, loc, found, zero,
        WhereOp::create(b, loc, grow, scalarConst(b, loc, f32, delay),
                        nextTracker));
    Value skipped = CastOp::create(b, loc, scalarF32, found);
    // (Appending replaces the return: the builder is not used after.)
    appendResult(*f, newScale, SmpDialect::kUpdateAttr,
                 StringAttr::get(ctx, kLossScaleState));
    appendResult(*f, newTracker, SmpDialect::kUpdateAttr,
                 StringAttr::get(ctx, "@growth_tracker"));
    if (overflows)
      appendResult(*f, overflows, SmpDialect::kUpdateAttr,
                   StringAttr::get(ctx, "@loss_scale_overflows"));
    appendResult(*f, found, kFoundInfAttr, UnitAttr::get(ctx));
    appendResult(*f, skipped, SmpDialect::kOutputAttr, StringAttr::get(ctx, "skipped"));
  }
};

} // namespace
