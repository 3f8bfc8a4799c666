//===- GradientNorm.cpp - smp-gradient-norm -------------------------------===//
//
// Implements `smp-gradient-norm`: the global L2 norm of the gradients of
// @train_step (output grad_norm) and clipping by it.
//
//===----------------------------------------------------------------------===//

#include "TrainStepContract.h"
#include "TrainStepUtils.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "smp/Dialect/Smp/IR/SmpLayout.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"

#include <map>

#define DEBUG_TYPE "smp-gradient-norm"

namespace smp {
#define GEN_PASS_DEF_SMPGRADIENTNORMPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

struct SmpGradientNormPass
    : public smp::impl::SmpGradientNormPassBase<SmpGradientNormPass> {
  using Base::Base;

  /// The sum of the squares of every gradient (null without gradients).
  /// Summed per pipeline stage first (a tied weight's copies, which hold
  /// the same sum, count once), then over the stages, so that only scalars
  /// cross between stages. Tensor-parallel parameters: each rank holds a
  /// slice, so their squares are summed over the tp ranks too; ZeRO-1
  /// shards over the dp ranks.
  Value sumOfSquares(func::FuncOp f, OpBuilder &b,
                     ArrayRef<Gradient> grads) {
    Location loc = f.getLoc();
    std::map<std::pair<int64_t, bool>, Value> stageSumSq;
    llvm::StringSet<> seen; // parameters by name (tied copies share it)
    bool zero = false;
    for (const Gradient &g : grads) {
      zero |= g.sharded;
      auto name = f.getArgAttrOfType<StringAttr>(g.param.getArgNumber(),
                                                 SmpDialect::kParamAttr);
      if (name && !seen.insert(name.getValue()).second)
        continue;
      Value g32 = toF32(b, loc, g.value);
      Value sq = reduceAll<ReduceSumOp>(b, loc, MulOp::create(b, loc, g32, g32));
      LayoutAttr layout = getArgLayout(f, g.param.getArgNumber());
      bool sliced = layout && layout.hasTpSplit();
      Value &partial = stageSumSq[{stageOf(g.param).value_or(0), sliced}];
      partial = partial ? Value(AddOp::create(b, loc, partial, sq)) : sq;
    }
    Value sumSq;
    for (auto &[key, partial] : stageSumSq) {
      if (zero) // each rank summed the squares of its shards (its replica
                // group's ranks hold the same ones)
        partial = allReduceDp(b, loc, partial, DpGroup::Shard);
      if (key.second)
        partial = shard::AllReduceOp::create(b, loc, partial, "tp",
                                             ArrayRef<shard::GridAxis>{0},
                                             shard::ReductionKind::Sum);
      sumSq = sumSq ? Value(AddOp::create(b, loc, sumSq, partial)) : partial;
    }
    return sumSq;
  }

  void runOnOperation() override {
    auto f = trainStep(getOperation(), "smp-gradient-norm");
    if (failed(f))
      return signalPassFailure();
    OpBuilder b(f->getBody().front().getTerminator());
    Location loc = f->getLoc();
    Type f32 = b.getF32Type();
    SmallVector<Gradient> grads = gradients(*f);
    Value sumSq = sumOfSquares(*f, b, grads);
    Value gradNorm = sumSq ? Value(SqrtOp::create(b, loc, sumSq))
                           : scalarConst(b, loc, f32, 0.0);
    if (clipGradNorm > 0 && sumSq) {
      // coef = min(1, max_norm / (norm + 1e-6)), as clip_grad_norm_.
      Value denom = AddOp::create(b, loc, gradNorm, scalarConst(b, loc, f32, 1e-6));
      Value coef = MinOp::create(
          b, loc, DivOp::create(b, loc, scalarConst(b, loc, f32, clipGradNorm), denom),
          scalarConst(b, loc, f32, 1.0));
      for (const Gradient &g : grads) {
        auto t = cast<RankedTensorType>(g.value.getType());
        Value c = t.getElementType() == f32
                      ? coef
                      : Value(CastOp::create(b, loc, RankedTensorType::get({}, t.getElementType()), coef));
        setResult(*f, g.result, MulOp::create(b, loc, g.value, c));
      }
    }
    appendResult(*f, gradNorm, SmpDialect::kOutputAttr,
                 StringAttr::get(&getContext(), "grad_norm"));
  }
};

} // namespace
