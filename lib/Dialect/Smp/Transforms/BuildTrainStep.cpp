//===- BuildTrainStep.cpp - forward + loss + backward + optimizer ---------===//
//
// Implements `smp-build-train-step`.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/IRMapping.h"
#include "smp/Dialect/Smp/Autodiff/Autodiff.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/Support/Regex.h"

#define DEBUG_TYPE "smp-build-train-step"

namespace smp {
#define GEN_PASS_DEF_SMPBUILDTRAINSTEPPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

Value scalarConst(OpBuilder &b, Location loc, Type elt, double v) {
  auto type = RankedTensorType::get({}, elt);
  APFloat value(v);
  bool loses;
  value.convert(cast<FloatType>(elt).getFloatSemantics(),
                APFloat::rmNearestTiesToEven, &loses);
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, value));
}

/// `v` reduced to a scalar over every axis (sum, or mean).
template <typename ReduceOpT>
Value reduceAll(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < t.getRank(); ++d)
    axes.push_back(d);
  return ReduceOpT::create(b, loc, v, b.getDenseI64ArrayAttr(axes), false);
}

/// `v` with f32 elements (cast when it has another float type).
Value toF32(OpBuilder &b, Location loc, Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  if (t.getElementType().isF32())
    return v;
  return CastOp::create(b, loc, t.clone(b.getF32Type()), v);
}

struct SmpBuildTrainStepPass
    : public smp::impl::SmpBuildTrainStepPassBase<SmpBuildTrainStepPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("smp-build-train-step: no func @main to train");
      return signalPassFailure();
    }
    if (module.lookupSymbol("train_step")) {
      module.emitError("smp-build-train-step: @train_step exists already");
      return signalPassFailure();
    }
    if (optimizer != "sgd" && optimizer != "adam" && optimizer != "adamw") {
      module.emitError() << "unknown optimizer '" << optimizer
                         << "' (expected sgd, adam or adamw)";
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    if (dp > 1 && !module.lookupSymbol("dp")) {
      b.setInsertionPointToStart(module.getBody());
      shard::GridOp::create(b, module.getLoc(), "dp",
                            ArrayRef<int64_t>{static_cast<int64_t>(dp)});
    }
    b.setInsertionPointAfter(main);
    auto step = cast<func::FuncOp>(b.clone(*main));
    step.setSymName("train_step");
    if (failed(build(step)))
      return signalPassFailure();
  }

  /// Sum over the data-parallel ranks (shard.all_reduce on the dp grid).
  Value allReduce(OpBuilder &b, Location loc, Value v) {
    return shard::AllReduceOp::create(b, loc, v, "dp",
                                      ArrayRef<shard::GridAxis>{0},
                                      shard::ReductionKind::Sum);
  }

  /// v flattened to 1-D and zero-padded to a multiple of the dp ranks.
  Value flatten(OpBuilder &b, Location loc, Value v) {
    auto t = cast<RankedTensorType>(v.getType());
    int64_t n = t.getNumElements(), padded = (n + dp - 1) / dp * dp;
    Value flat = ReshapeOp::create(b, loc, t.clone(ArrayRef<int64_t>{n}), v);
    if (padded == n)
      return flat;
    auto zeros = RankedTensorType::get({padded - n}, t.getElementType());
    Value pad = ConstantOp::create(
        b, loc, DenseElementsAttr::get(
                    zeros, APFloat::getZero(cast<FloatType>(t.getElementType())
                                                .getFloatSemantics())));
    return ConcatOp::create(b, loc, ValueRange{flat, pad},
                            b.getI64IntegerAttr(0));
  }

  /// Sums a flattened gradient over the ranks, keeping this rank's chunk.
  Value reduceScatter(OpBuilder &b, Location loc, Value flat) {
    auto t = cast<RankedTensorType>(flat.getType());
    auto chunk = t.clone(ArrayRef<int64_t>{t.getDimSize(0) / dp});
    return shard::ReduceScatterOp::create(
        b, loc, chunk, FlatSymbolRefAttr::get(b.getContext(), "dp"),
        b.getDenseI16ArrayAttr({0}), flat,
        shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum),
        b.getIndexAttr(0));
  }

  /// Gathers every rank's updated chunk back into the parameter's shape.
  Value unshard(OpBuilder &b, Location loc, Value chunk, Value param) {
    auto pt = cast<RankedTensorType>(param.getType());
    auto ct = cast<RankedTensorType>(chunk.getType());
    int64_t n = pt.getNumElements(), padded = ct.getDimSize(0) * dp;
    Value all = shard::AllGatherOp::create(
        b, loc, ct.clone(ArrayRef<int64_t>{padded}),
        FlatSymbolRefAttr::get(b.getContext(), "dp"),
        b.getDenseI16ArrayAttr({0}), chunk, b.getIndexAttr(0));
    if (padded != n)
      all = SliceOp::create(b, loc, all, b.getDenseI64ArrayAttr({0}),
                            b.getDenseI64ArrayAttr({n}),
                            b.getDenseI64ArrayAttr({1}));
    return ReshapeOp::create(b, loc, pt, all);
  }

  /// Whether the built loss is already this rank's share of the global one.
  bool perRankShare = false;

  /// The value named `name` among the function's outputs.
  FailureOr<Value> output(func::FuncOp f, StringRef name) {
    auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (auto n = f.getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr);
          n && n.getValue() == name)
        return ret.getOperand(i);
    std::string names;
    for (unsigned i = 0; i < f.getNumResults(); ++i)
      if (auto n = f.getResultAttrOfType<StringAttr>(i, SmpDialect::kOutputAttr))
        names += (names.empty() ? "" : ", ") + n.str();
    f.emitError() << "the model has no output named '" << name
                  << "' (outputs: " << names << ")";
    return failure();
  }

  Value addInput(func::FuncOp f, Type type, StringRef name) {
    unsigned index = f.getNumArguments();
    (void)f.insertArgument(index, type,
                           DictionaryAttr::get(
                               f.getContext(),
                               {NamedAttribute(
                                   StringAttr::get(f.getContext(),
                                                   SmpDialect::kInputAttr),
                                   StringAttr::get(f.getContext(), name))}),
                           f.getLoc());
    return f.getArgument(index);
  }

  /// Builds the scalar loss at the end of the body.
  FailureOr<Value> buildLoss(func::FuncOp f, OpBuilder &b) {
    SmallVector<StringRef> parts;
    StringRef(loss).split(parts, ':');
    Location loc = f.getLoc();
    if (parts.size() == 1 && !parts[0].empty()) {
      auto v = output(f, parts[0]);
      if (failed(v))
        return failure();
      auto t = cast<RankedTensorType>(v->getType());
      if (t.getNumElements() != 1 || !isa<FloatType>(t.getElementType())) {
        f.emitError() << "loss output '" << parts[0]
                      << "' must be a float scalar, got " << t;
        return failure();
      }
      return *v;
    }
    if (parts.size() == 3 && parts[0] == "cross_entropy") {
      auto logits = output(f, parts[1]);
      if (failed(logits))
        return failure();
      auto lt = cast<RankedTensorType>(logits->getType());
      if (lt.getRank() < 1 || !isa<FloatType>(lt.getElementType())) {
        f.emitError() << "cross_entropy logits '" << parts[1]
                      << "' must be float [..., classes], got " << lt;
        return failure();
      }
      Value labels = addInput(
          f, RankedTensorType::get(lt.getShape().drop_back(), b.getI64Type()),
          parts[2]);
      if (dp <= 1)
        return Value(CrossEntropyOp::create(b, loc, *logits, labels, Value(),
                                            -100, Reduction::mean));
      // Data parallel: this rank's share of the global mean, sum_r / count
      // over every rank's labels that are not ignored, so the ranks' losses
      // (and gradients) add up to exactly the one-device values.
      Value sum = CrossEntropyOp::create(b, loc, *logits, labels, Value(),
                                         -100, Reduction::sum);
      auto lab = cast<RankedTensorType>(labels.getType());
      Value ignore = ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                 int64_t(-100)));
      Value kept = CastOp::create(
          b, loc, lab.clone(b.getF32Type()),
          NotOp::create(b, loc, EqualOp::create(b, loc, labels, ignore)));
      Value total = allReduce(b, loc, reduceAll<ReduceSumOp>(b, loc, kept));
      perRankShare = true;
      return Value(DivOp::create(b, loc, toF32(b, loc, sum), total));
    }
    if (parts.size() == 3 && parts[0] == "mse") {
      auto out = output(f, parts[1]);
      if (failed(out))
        return failure();
      auto ot = cast<RankedTensorType>(out->getType());
      Value target = addInput(f, ot, parts[2]);
      Value d = SubOp::create(b, loc, *out, target);
      return reduceAll<ReduceMeanOp>(b, loc, MulOp::create(b, loc, d, d));
    }
    f.emitError() << "bad --loss '" << loss
                  << "': expected NAME, cross_entropy:LOGITS:LABELS or "
                     "mse:OUTPUT:TARGET";
    return failure();
  }

  LogicalResult build(func::FuncOp f) {
    MLIRContext *ctx = f.getContext();
    Block &body = f.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ret);
    Location loc = f.getLoc();
    auto lossValue = buildLoss(f, b);
    if (failed(lossValue))
      return failure();

    // Trainable parameters: float, not frozen, not matching --freeze.
    llvm::Regex frozen(freeze);
    std::string regexError;
    if (!freeze.empty() && !frozen.isValid(regexError))
      return f.emitError() << "bad --freeze regex '" << freeze
                           << "': " << regexError;
    SmallVector<Value> params;
    SmallVector<std::string> names;
    for (BlockArgument arg : body.getArguments()) {
      unsigned i = arg.getArgNumber();
      auto name = f.getArgAttrOfType<StringAttr>(i, SmpDialect::kParamAttr);
      if (!name || f.getArgAttr(i, SmpDialect::kFrozenAttr))
        continue;
      if (!isa<FloatType>(cast<RankedTensorType>(arg.getType()).getElementType()))
        continue;
      if (!freeze.empty() && frozen.match(name.getValue()))
        continue;
      params.push_back(arg);
      names.push_back(name.str());
    }
    Type f32 = b.getF32Type();
    Type scalarF32 = RankedTensorType::get({}, f32);
    auto addState = [&](Type type, const std::string &name,
                        std::optional<float> init = std::nullopt) {
      unsigned index = f.getNumArguments();
      SmallVector<NamedAttribute> attrs{NamedAttribute(
          StringAttr::get(ctx, SmpDialect::kStateAttr),
          StringAttr::get(ctx, name))};
      if (init)
        attrs.push_back(NamedAttribute(StringAttr::get(ctx, "smp.init"),
                                       b.getF32FloatAttr(*init)));
      (void)f.insertArgument(index, type, DictionaryAttr::get(ctx, attrs), loc);
      return f.getArgument(index);
    };
    // The loss in f32, as a scalar.
    Value loss32 = *lossValue;
    {
      auto lt = cast<RankedTensorType>(loss32.getType());
      if (lt.getRank() != 0)
        loss32 = ReshapeOp::create(b, loc, lt.clone(ArrayRef<int64_t>{}), loss32);
      loss32 = toF32(b, loc, loss32);
    }
    // Data parallel: every rank differentiates its share of the global loss
    // and the gradients are summed over the ranks.
    if (dp > 1 && !perRankShare)
      loss32 = DivOp::create(b, loc, loss32,
                             scalarConst(b, loc, f32, static_cast<double>(dp)));
    // Dynamic loss scaling (fp16): differentiate loss * scale, then unscale.
    Value scale, found, scaleUsed;
    if (lossScaling) {
      scale = addState(scalarF32, "@loss_scale", float(initScale));
      // The scale this step used, read before the scale's in-place update.
      scaleUsed = MulOp::create(b, loc, scale, scalarConst(b, loc, f32, 1.0));
    }
    Value target = scale ? Value(MulOp::create(b, loc, loss32, scale)) : loss32;
    auto grads = differentiate(b, body, target, params);
    if (failed(grads))
      return failure();
    bool zero = dp > 1 && shardOptimizerState;
    if (zero && scale) {
      f.emitError() << "--shard-optimizer-state with fp16 loss scaling is not "
                       "supported yet";
      return failure();
    }
    if (dp > 1) {
      for (Value &g : *grads)
        if (g) // ZeRO-1: each rank keeps the sum of its shard only
          g = zero ? reduceScatter(b, loc, flatten(b, loc, g)) : allReduce(b, loc, g);
      loss32 = allReduce(b, loc, loss32); // the global loss, on every rank
    }
    if (scale) {
      // Any inf or NaN gradient makes sum(g * 0) NaN.
      Value total;
      for (Value &g : *grads) {
        if (!g)
          continue;
        auto t = cast<RankedTensorType>(g.getType());
        Value z = reduceAll<ReduceSumOp>(
            b, loc,
            MulOp::create(b, loc, toF32(b, loc, g), scalarConst(b, loc, f32, 0.0)));
        total = total ? Value(AddOp::create(b, loc, total, z)) : z;
        Value inv = DivOp::create(b, loc, scalarConst(b, loc, f32, 1.0), scale);
        if (t.getElementType() != f32)
          inv = CastOp::create(b, loc, RankedTensorType::get({}, t.getElementType()), inv);
        g = MulOp::create(b, loc, g, inv);
      }
      found = total ? Value(NotOp::create(b, loc, EqualOp::create(b, loc, total, total)))
                    : Value(ConstantOp::create(
                          b, loc, DenseElementsAttr::get(
                                      RankedTensorType::get({}, b.getI1Type()), false)));
    }

    // Global gradient norm (always reported), then optional clipping.
    Value sumSq;
    for (Value g : *grads) {
      if (!g)
        continue;
      Value g32 = toF32(b, loc, g);
      Value sq = reduceAll<ReduceSumOp>(b, loc, MulOp::create(b, loc, g32, g32));
      sumSq = sumSq ? Value(AddOp::create(b, loc, sumSq, sq)) : sq;
    }
    if (zero && sumSq) // each rank summed the squares of its shards
      sumSq = allReduce(b, loc, sumSq);
    Value gradNorm = sumSq ? Value(SqrtOp::create(b, loc, sumSq))
                           : scalarConst(b, loc, f32, 0.0);
    SmallVector<Value> clipped(grads->begin(), grads->end());
    if (clipGradNorm > 0 && sumSq) {
      // coef = min(1, max_norm / (norm + 1e-6)), as clip_grad_norm_.
      Value denom = AddOp::create(b, loc, gradNorm, scalarConst(b, loc, f32, 1e-6));
      Value coef = MinOp::create(
          b, loc, DivOp::create(b, loc, scalarConst(b, loc, f32, clipGradNorm), denom),
          scalarConst(b, loc, f32, 1.0));
      for (Value &g : clipped) {
        if (!g)
          continue;
        auto t = cast<RankedTensorType>(g.getType());
        Value c = t.getElementType() == f32
                      ? coef
                      : Value(CastOp::create(b, loc, RankedTensorType::get({}, t.getElementType()), coef));
        g = MulOp::create(b, loc, g, c);
      }
    }

    Value lr = addInput(f, scalarF32, "@lr");
    Value stepIndex = addInput(f, scalarF32, "@step");
    float wd = weightDecay >= 0 ? weightDecay.getValue()
                                : (optimizer == "adamw" ? 0.01f : 0.0f);

    SmallVector<Value> newResults;
    SmallVector<DictionaryAttr> newAttrs;
    auto updateAttr = [&](StringRef name) {
      return DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, SmpDialect::kUpdateAttr),
                               StringAttr::get(ctx, name))});
    };
    if (scale) {
      // Skipped steps do not count for the optimizer (as GradScaler skips
      // optimizer.step()): its own step counter, and the scale's update.
      Value one = scalarConst(b, loc, f32, 1.0), zero = scalarConst(b, loc, f32, 0.0);
      Value optStep = addState(scalarF32, "@optimizer_step");
      Value tracker = addState(scalarF32, "@growth_tracker");
      Value nextStep = AddOp::create(b, loc, optStep, one);
      Value newStep = WhereOp::create(b, loc, found, optStep, nextStep);
      Value nextTracker = AddOp::create(b, loc, tracker, one);
      Value grow = Value(GreaterOp::create(
          b, loc, nextTracker, scalarConst(b, loc, f32, growthInterval - 0.5)));
      Value grown = WhereOp::create(
          b, loc, grow, MulOp::create(b, loc, scale, scalarConst(b, loc, f32, 2.0)),
          scale);
      Value newScale = WhereOp::create(
          b, loc, found, MulOp::create(b, loc, scale, scalarConst(b, loc, f32, 0.5)),
          grown);
      Value newTracker = WhereOp::create(
          b, loc, found, zero, WhereOp::create(b, loc, grow, zero, nextTracker));
      stepIndex = nextStep;
      for (auto [v, name] :
           {std::make_pair(newScale, "@loss_scale"),
            std::make_pair(newTracker, "@growth_tracker"),
            std::make_pair(newStep, "@optimizer_step")}) {
        newResults.push_back(v);
        newAttrs.push_back(updateAttr(name));
      }
    }
    for (auto [param, g, name] : llvm::zip(params, clipped, names)) {
      if (!g)
        continue; // no gradient reaches it: PyTorch skips it too
      Type type = param.getType();
      Value paramIn = param;
      if (zero) { // update this rank's shard of the flattened parameter
        paramIn = shard::AllSliceOp::create(
            b, loc, g.getType(), flatten(b, loc, param), "dp",
            ArrayRef<shard::GridAxis>{0}, 0);
        type = g.getType();
      }
      Value lrT = lr, stepT = stepIndex;
      auto elt = cast<RankedTensorType>(type).getElementType();
      if (elt != f32) {
        lrT = CastOp::create(b, loc, RankedTensorType::get({}, elt), lr);
        stepT = CastOp::create(b, loc, RankedTensorType::get({}, elt), stepIndex);
      }
      if (optimizer == "sgd") {
        Value buf = momentum != 0.0f ? addState(type, name + ".momentum_buffer")
                                     : g;
        auto upd = SgdUpdateOp::create(
            b, loc, type, type, paramIn, g, buf, lrT, stepT, found,
            b.getF32FloatAttr(momentum), b.getF32FloatAttr(dampening),
            b.getF32FloatAttr(wd), b.getBoolAttr(nesterov));
        newResults.push_back(zero ? unshard(b, loc, upd.getNewParam(), param)
                                  : upd.getNewParam());
        newAttrs.push_back(updateAttr(name));
        if (momentum != 0.0f) {
          newResults.push_back(upd.getNewMomentumBuffer());
          newAttrs.push_back(updateAttr(name + ".momentum_buffer"));
        }
        continue;
      }
      Value m = addState(type, name + ".exp_avg");
      Value v = addState(type, name + ".exp_avg_sq");
      auto upd = AdamUpdateOp::create(
          b, loc, type, type, type, paramIn, g, m, v, lrT, stepT, found,
          b.getF32FloatAttr(beta1), b.getF32FloatAttr(beta2),
          b.getF32FloatAttr(epsilon), b.getF32FloatAttr(wd),
          b.getBoolAttr(optimizer == "adamw"));
      newResults.push_back(zero ? unshard(b, loc, upd.getNewParam(), param)
                                : upd.getNewParam());
      newAttrs.push_back(updateAttr(name));
      newResults.push_back(upd.getNewExpAvg());
      newAttrs.push_back(updateAttr(name + ".exp_avg"));
      newResults.push_back(upd.getNewExpAvgSq());
      newAttrs.push_back(updateAttr(name + ".exp_avg_sq"));
    }
    auto outputAttr = [&](StringRef name) {
      return DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, SmpDialect::kOutputAttr),
                               StringAttr::get(ctx, name))});
    };
    newResults.push_back(loss32);
    newAttrs.push_back(outputAttr("loss"));
    newResults.push_back(gradNorm);
    newAttrs.push_back(outputAttr("grad_norm"));
    if (scale) {
      newResults.push_back(CastOp::create(b, loc, scalarF32, found));
      newAttrs.push_back(outputAttr("skipped"));
      newResults.push_back(scaleUsed);
      newAttrs.push_back(outputAttr("loss_scale"));
    }

    // Replace the forward outputs with the step's.
    func::ReturnOp::create(b, loc, newResults);
    ret.erase();
    SmallVector<Type> types;
    for (Value v : newResults)
      types.push_back(v.getType());
    f.setType(FunctionType::get(ctx, body.getArgumentTypes(), types));
    f.setAllResultAttrs(newAttrs);
    return success();
  }
};

} // namespace
