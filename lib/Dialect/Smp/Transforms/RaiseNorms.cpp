//===- RaiseNorms.cpp - Recognise layer-norm and RMS-norm chains ----------===//
//
// Implements `smp-raise-norms`.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#define DEBUG_TYPE "smp-raise-norms"

namespace smp {
#define GEN_PASS_DEF_SMPRAISENORMSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

/// If `axes` (of a rank-`rank` tensor) are exactly the trailing dims, returns
/// the first of them.
std::optional<int64_t> trailingAxis(ArrayRef<int64_t> axes, int64_t rank) {
  SmallVector<int64_t> norm;
  for (int64_t a : axes) {
    auto n = normalizeAxis(a, rank);
    if (!n)
      return std::nullopt;
    norm.push_back(*n);
  }
  llvm::sort(norm);
  for (size_t i = 0; i < norm.size(); ++i)
    if (norm[i] != rank - static_cast<int64_t>(norm.size() - i))
      return std::nullopt;
  if (norm.empty())
    return std::nullopt;
  return norm.front();
}

/// Matches `a + eps` (either order) and returns (a, eps).
std::optional<std::pair<Value, double>> matchAddEps(Value v) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return std::nullopt;
  if (auto eps = getSplatConstant(add.getRhs()))
    return std::make_pair(add.getLhs(), *eps);
  if (auto eps = getSplatConstant(add.getLhs()))
    return std::make_pair(add.getRhs(), *eps);
  return std::nullopt;
}

/// Matches `mean(y * y over trailing axes)` or `mean(y ^ 2 ...)`; returns y and
/// the first reduced axis.
std::optional<std::pair<Value, int64_t>> matchMeanSquare(Value v) {
  auto mean = v.getDefiningOp<ReduceMeanOp>();
  if (!mean || !mean.getKeepdims())
    return std::nullopt;
  auto axis = trailingAxis(mean.getAxes(), mean.getInput().getType().getRank());
  if (!axis)
    return std::nullopt;
  Value sq = mean.getInput();
  if (auto pow = sq.getDefiningOp<PowOp>();
      pow && isSplatConstant(pow.getRhs(), 2.0))
    return std::make_pair(pow.getLhs(), *axis);
  if (auto mul = sq.getDefiningOp<MulOp>(); mul && mul.getLhs() == mul.getRhs())
    return std::make_pair(mul.getLhs(), *axis);
  return std::nullopt;
}

struct InvRms {
  Value centered; // the tensor whose mean square is taken
  int64_t axis;
  double eps;
};

/// Matches mean(y^2) + eps, the argument of the square root.
std::optional<InvRms> matchMeanSquarePlusEps(Value v) {
  auto addEps = matchAddEps(v);
  if (!addEps)
    return std::nullopt;
  auto ms = matchMeanSquare(addEps->first);
  if (!ms)
    return std::nullopt;
  return InvRms{ms->first, ms->second, addEps->second};
}

/// Matches 1/sqrt(mean(y^2) + eps) in its reciprocal/rsqrt spellings.
std::optional<InvRms> matchInvSqrt(Value v) {
  Value sqrtArg;
  if (auto rsqrt = v.getDefiningOp<RsqrtOp>()) {
    sqrtArg = rsqrt.getInput();
  } else if (auto recip = v.getDefiningOp<ReciprocalOp>()) {
    auto sqrt = recip.getInput().getDefiningOp<SqrtOp>();
    if (!sqrt)
      return std::nullopt;
    sqrtArg = sqrt.getInput();
  } else if (auto div = v.getDefiningOp<DivOp>();
             div && isSplatConstant(div.getLhs(), 1.0)) {
    auto sqrt = div.getRhs().getDefiningOp<SqrtOp>();
    if (!sqrt)
      return std::nullopt;
    sqrtArg = sqrt.getInput();
  } else {
    return std::nullopt;
  }
  return matchMeanSquarePlusEps(sqrtArg);
}

/// Matches sqrt(mean(y^2) + eps) (a divisor).
std::optional<InvRms> matchSqrt(Value v) {
  auto sqrt = v.getDefiningOp<SqrtOp>();
  if (!sqrt)
    return std::nullopt;
  return matchMeanSquarePlusEps(sqrt.getInput());
}

/// Splits `factors` into (normalised tensor x, inverse rms, the rest), where
/// the product is x * invrms(x) * rest, or (x / sqrt(ms(x)+eps)) * rest.
struct NormMatch {
  Value x;
  InvRms rms;
  SmallVector<Value> rest;
};

std::optional<NormMatch> matchNormProduct(ArrayRef<Value> factors) {
  for (size_t i = 0; i < factors.size(); ++i) {
    if (auto div = factors[i].getDefiningOp<DivOp>()) {
      if (auto rms = matchSqrt(div.getRhs());
          rms && rms->centered == div.getLhs()) {
        NormMatch m{div.getLhs(), *rms, {}};
        for (size_t j = 0; j < factors.size(); ++j)
          if (j != i)
            m.rest.push_back(factors[j]);
        return m;
      }
    }
    auto rms = matchInvSqrt(factors[i]);
    if (!rms)
      continue;
    for (size_t j = 0; j < factors.size(); ++j) {
      if (j == i || factors[j] != rms->centered)
        continue;
      NormMatch m{factors[j], *rms, {}};
      for (size_t k = 0; k < factors.size(); ++k)
        if (k != i && k != j)
          m.rest.push_back(factors[k]);
      return m;
    }
  }
  return std::nullopt;
}

bool isScaleFor(Value scale, RankedTensorType input, int64_t axis) {
  auto type = cast<RankedTensorType>(scale.getType());
  auto normShape = input.getShape().drop_front(axis);
  auto shape = broadcastShapes(normShape, type.getShape());
  return type.getElementType() == input.getElementType() && shape &&
         ArrayRef<int64_t>(*shape) == normShape;
}

/// (x - mean(x)) * invstd * scale  ->  layer_norm(x, scale)
/// x * invrms(x) * scale          ->  rms_norm(x, scale)
struct RaiseNormProduct : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> factors = collectMulFactors(op.getResult());
    auto match = matchNormProduct(factors);
    if (!match)
      return rewriter.notifyMatchFailure(op, "no normalisation product");
    if (match->rest.size() != 1)
      return rewriter.notifyMatchFailure(op, "needs exactly one scale");
    Value scale = match->rest.front();
    auto type = op.getType();
    Value centered = match->x;
    if (centered.getType() != type)
      return rewriter.notifyMatchFailure(op, "normalised tensor broadcasts");
    int64_t axis = match->rms.axis;
    if (!isScaleFor(scale, type, axis))
      return rewriter.notifyMatchFailure(op, "scale shape does not match");
    float eps = static_cast<float>(match->rms.eps);
    // Layer norm: the centred tensor is x - mean(x) over the same axes.
    if (auto sub = centered.getDefiningOp<SubOp>()) {
      auto mean = sub.getRhs().getDefiningOp<ReduceMeanOp>();
      if (mean && mean.getInput() == sub.getLhs() && mean.getKeepdims() &&
          trailingAxis(mean.getAxes(), type.getRank()) == axis &&
          sub.getLhs().getType() == type) {
        rewriter.replaceOpWithNewOp<LayerNormOp>(
            op, type, sub.getLhs(), scale, Value(),
            rewriter.getI64IntegerAttr(axis), rewriter.getF32FloatAttr(eps));
        return success();
      }
    }
    if (axis != type.getRank() - 1)
      return rewriter.notifyMatchFailure(op, "rms norm over several dims");
    rewriter.replaceOpWithNewOp<RmsNormOp>(op, type, centered, scale,
                                           rewriter.getF32FloatAttr(eps));
    return success();
  }
};

/// layer_norm(x, scale) + bias  ->  layer_norm(x, scale, bias)
struct FoldLayerNormBias : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [norm, bias] : {std::make_pair(op.getLhs(), op.getRhs()),
                              std::make_pair(op.getRhs(), op.getLhs())}) {
      auto ln = norm.getDefiningOp<LayerNormOp>();
      if (!ln || ln.getBias() || !norm.hasOneUse() ||
          ln.getType() != op.getType())
        continue;
      if (!isScaleFor(bias, ln.getType(), static_cast<int64_t>(ln.getAxis())))
        continue;
      rewriter.replaceOpWithNewOp<LayerNormOp>(
          op, ln.getType(), ln.getInput(), ln.getScale(), bias,
          ln.getAxisAttr(), ln.getEpsilonAttr());
      return success();
    }
    return rewriter.notifyMatchFailure(op, "not a layer norm plus bias");
  }
};

struct SmpRaiseNormsPass
    : public smp::impl::SmpRaiseNormsPassBase<SmpRaiseNormsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseNormProduct, FoldLayerNormBias>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
