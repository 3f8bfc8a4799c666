//===- RaiseActivations.cpp - Recognise GELU and SiLU chains --------------===//
//
// Implements `smp-raise-activations`.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Dialect/Smp/Transforms/MatchUtils.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

#include <cmath>

#define DEBUG_TYPE "smp-raise-activations"

namespace smp {
#define GEN_PASS_DEF_SMPRAISEACTIVATIONSPASS
#include "smp/Dialect/Smp/Transforms/Passes.h.inc"
} // namespace smp

using namespace mlir;
using namespace smp;

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kKappa = 0.044715;

/// Matches `1 + f(x)` and returns f(x).
Value matchOnePlus(Value v) {
  auto add = v.getDefiningOp<AddOp>();
  if (!add)
    return {};
  if (isSplatConstant(add.getLhs(), 1.0))
    return add.getRhs();
  if (isSplatConstant(add.getRhs(), 1.0))
    return add.getLhs();
  return {};
}

/// Matches `x / sqrt(2)` or `x * (1/sqrt(2))` and returns x.
Value matchDivSqrt2(Value v) {
  if (auto div = v.getDefiningOp<DivOp>())
    return isSplatConstant(div.getRhs(), kSqrt2) ? div.getLhs() : Value();
  if (auto mul = v.getDefiningOp<MulOp>()) {
    if (isSplatConstant(mul.getRhs(), 1.0 / kSqrt2))
      return mul.getLhs();
    if (isSplatConstant(mul.getLhs(), 1.0 / kSqrt2))
      return mul.getRhs();
  }
  return {};
}

/// Removes one constant factor equal to `value` from `factors`.
bool takeConstant(SmallVectorImpl<Value> &factors, double value) {
  for (auto *it = factors.begin(); it != factors.end(); ++it)
    if (isSplatConstant(*it, value)) {
      factors.erase(it);
      return true;
    }
  return false;
}

/// Removes `n` occurrences of `x` from `factors`.
bool take(SmallVectorImpl<Value> &factors, Value x, unsigned n = 1) {
  for (unsigned i = 0; i < n; ++i) {
    auto *it = llvm::find(factors, x);
    if (it == factors.end())
      return false;
    factors.erase(it);
  }
  return true;
}

/// True if `v` is x^3 written as pow(x, 3) or as a product with x three times.
bool isCube(Value v, Value x) {
  if (auto pow = v.getDefiningOp<PowOp>())
    return pow.getLhs() == x && isSplatConstant(pow.getRhs(), 3.0);
  SmallVector<Value> f = collectMulFactors(v);
  return take(f, x, 3) && f.empty();
}

/// True if `v` is sqrt(2/pi) * (x + 0.044715 * x^3).
bool isTanhInner(Value v, Value x) {
  SmallVector<Value> f = collectMulFactors(v);
  if (!takeConstant(f, kSqrt2OverPi) || f.size() != 1)
    return false;
  auto add = f.front().getDefiningOp<AddOp>();
  if (!add)
    return false;
  Value other = add.getLhs() == x ? add.getRhs()
                : add.getRhs() == x ? add.getLhs()
                                    : Value();
  if (!other)
    return false;
  SmallVector<Value> g = collectMulFactors(other);
  if (!takeConstant(g, kKappa))
    return false;
  if (g.size() == 1)
    return isCube(g.front(), x);
  return take(g, x, 3) && g.empty();
}

struct RaiseGelu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> factors = collectMulFactors(op.getResult());
    if (factors.size() != 3 || !takeConstant(factors, 0.5))
      return rewriter.notifyMatchFailure(op, "not 0.5 * x * (...)");
    for (int i = 0; i < 2; ++i) {
      Value x = factors[i], gate = factors[1 - i];
      if (x.getType() != op.getType())
        continue;
      Value inner = matchOnePlus(gate);
      if (!inner)
        continue;
      if (auto erf = inner.getDefiningOp<ErfOp>();
          erf && matchDivSqrt2(erf.getInput()) == x) {
        rewriter.replaceOpWithNewOp<GeluOp>(op, x, GeluApproximation::none);
        return success();
      }
      if (auto tanh = inner.getDefiningOp<TanhOp>();
          tanh && isTanhInner(tanh.getInput(), x)) {
        rewriter.replaceOpWithNewOp<GeluOp>(op, x, GeluApproximation::tanh);
        return success();
      }
    }
    return rewriter.notifyMatchFailure(op, "no GELU gate");
  }
};

struct RaiseSilu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp op,
                                PatternRewriter &rewriter) const override {
    for (auto [x, gate] : {std::make_pair(op.getLhs(), op.getRhs()),
                           std::make_pair(op.getRhs(), op.getLhs())}) {
      auto sigmoid = gate.getDefiningOp<SigmoidOp>();
      if (sigmoid && sigmoid.getInput() == x && x.getType() == op.getType()) {
        rewriter.replaceOpWithNewOp<SiluOp>(op, x);
        return success();
      }
    }
    return rewriter.notifyMatchFailure(op, "not x * sigmoid(x)");
  }
};

struct SmpRaiseActivationsPass
    : public smp::impl::SmpRaiseActivationsPassBase<SmpRaiseActivationsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RaiseGelu, RaiseSilu>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
