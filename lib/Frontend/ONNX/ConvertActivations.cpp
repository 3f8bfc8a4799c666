//===- ConvertActivations.cpp - ONNX activations composed of smp ops ------===//
//
// Elu, Selu, Celu, HardSigmoid, HardSwish, Softplus, Softsign, Mish, PRelu
// and ThresholdedRelu, each written with the elementwise ops smp already
// has (every backend runs them and autodiff differentiates them): no op,
// kernel or VJP of their own. The forms avoid infinities in branches a
// `where` discards (their gradient would be 0 * inf = NaN): exp reads
// min(x, 0), softplus is max(x, 0) + log(1 + exp(-|x|)).
//
//===----------------------------------------------------------------------===//

#include "Chain.h"
#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <cmath>
#include <optional>
#include <string>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// Chain with the activations' compositions.
class ActivationChain : public Chain {
public:
  using Chain::Chain;
  /// alpha * (exp(min(x, 0) / scale) - 1), where x <= 0 (Elu, Celu). The
  /// min is a where, so that at x = 0 the gradient is PyTorch's, the
  /// negative side's (alpha / scale): min's would split a tie in half (a
  /// normalised constant row with a zero bias is exactly 0).
  Value expm1Negative(Value x, double alpha, double scale) {
    Value neg =
        where(binary<smp::GreaterOp>(x, scalar(x, 0.0)), scalar(x, 0.0), x);
    if (scale != 1.0)
      neg = binary<smp::DivOp>(neg, scalar(x, scale));
    Value e = binary<smp::SubOp>(unary<smp::ExpOp>(neg), scalar(x, 1.0));
    return alpha == 1.0 ? e : binary<smp::MulOp>(e, scalar(x, alpha));
  }
  /// x where x > 0, else `other`.
  Value positiveOr(Value x, Value other) {
    return where(binary<smp::GreaterOp>(x, scalar(x, 0.0)), x, other);
  }
  /// max(0, min(1, alpha * x + beta)) with PyTorch's gradient at the
  /// bounds: alpha strictly inside (0, 1) (hardsigmoid: `strict` max/min,
  /// whose gradient gives a tie to neither side), or on [0, 1] with
  /// `closed` (hardswish's: wheres).
  Value hardSigmoid(Value x, double alpha, double beta, bool closed = false) {
    Value y = binary<smp::AddOp>(binary<smp::MulOp>(x, scalar(x, alpha)),
                                 scalar(x, beta));
    Value zero = scalar(x, 0.0), one = scalar(x, 1.0);
    if (closed)
      return where(binary<smp::LessOp>(y, zero), zero,
                   where(binary<smp::GreaterOp>(y, one), one, y));
    return make<smp::MaxOp>(make<smp::MinOp>(y, one, /*strict=*/true), zero,
                            /*strict=*/true);
  }
  /// x - (x mod 1) with the floor remainder (in [0, 1)): exact, and its
  /// gradient is 1 - 1 = 0.
  Value floor(Value x) {
    if (!isa<FloatType>(tensorType(x).getElementType()))
      return x;
    return binary<smp::SubOp>(x, binary<smp::ModOp>(x, scalar(x, 1.0)));
  }
  /// log(1 + exp(x)) without overflow.
  Value softplus(Value x) {
    Value tail = unary<smp::ExpOp>(unary<smp::NegOp>(unary<smp::AbsOp>(x)));
    Value log = unary<smp::LogOp>(binary<smp::AddOp>(tail, scalar(x, 1.0)));
    return binary<smp::AddOp>(binary<smp::MaxOp>(x, scalar(x, 0.0)), log);
  }
};

/// Registers an activation of input 0 built by `body(chain, x, node)`.
template <typename Body> Converter activation(Body body) {
  return [body](NodeContext &nc) -> llvm::Error {
    auto x = nc.input(0);
    if (!x)
      return x.takeError();
    ActivationChain c(nc);
    Value y = body(c, *x, nc);
    return c.finish(y);
  };
}

} // namespace

void registerActivationConverters(ConverterTable &t) {
  t["Elu"] = activation([](ActivationChain &c, Value x, NodeContext &nc) {
    return c.positiveOr(x,
                        c.expm1Negative(x, nc.attrFloat("alpha", 1.0f), 1.0));
  });
  t["Selu"] = activation([](ActivationChain &c, Value x, NodeContext &nc) {
    double alpha = nc.attrFloat("alpha", 1.67326319217681884765625f);
    double gamma = nc.attrFloat("gamma", 1.05070102214813232421875f);
    Value elu = c.positiveOr(x, c.expm1Negative(x, alpha, 1.0));
    return c.binary<smp::MulOp>(elu, c.scalar(x, gamma));
  });
  t["Celu"] = activation([](ActivationChain &c, Value x, NodeContext &nc) {
    double alpha = nc.attrFloat("alpha", 1.0f);
    return c.positiveOr(x, c.expm1Negative(x, alpha, alpha));
  });
  t["HardSigmoid"] = activation([](ActivationChain &c, Value x,
                                   NodeContext &nc) {
    return c.hardSigmoid(x, nc.attrFloat("alpha", 0.2f),
                         nc.attrFloat("beta", 0.5f));
  });
  t["HardSwish"] = activation([](ActivationChain &c, Value x, NodeContext &) {
    return c.binary<smp::MulOp>(x, c.hardSigmoid(x, 1.0 / 6.0, 0.5,
                                                 /*closed=*/true));
  });
  t["Softplus"] = activation(
      [](ActivationChain &c, Value x, NodeContext &) { return c.softplus(x); });
  t["Softsign"] = activation([](ActivationChain &c, Value x, NodeContext &) {
    Value d = c.binary<smp::AddOp>(c.unary<smp::AbsOp>(x), c.scalar(x, 1.0));
    return c.binary<smp::DivOp>(x, d);
  });
  t["Mish"] = activation([](ActivationChain &c, Value x, NodeContext &) {
    return c.binary<smp::MulOp>(x, c.unary<smp::TanhOp>(c.softplus(x)));
  });
  t["ThresholdedRelu"] = activation([](ActivationChain &c, Value x,
                                       NodeContext &nc) {
    Value above =
        c.binary<smp::GreaterOp>(x, c.scalar(x, nc.attrFloat("alpha", 1.0f)));
    return c.where(above, x, c.scalar(x, 0.0));
  });
  // Sign, Floor and Ceil: no gradient reaches x through them (PyTorch's is
  // zero), from comparisons cast to x's type and a floor remainder.
  t["Sign"] = activation([](ActivationChain &c, Value x, NodeContext &nc) {
    Type elt = tensorType(x).getElementType();
    Value pos =
        c.keep(nc.castTo(c.binary<smp::GreaterOp>(x, c.scalar(x, 0.0)), elt));
    Value neg =
        c.keep(nc.castTo(c.binary<smp::LessOp>(x, c.scalar(x, 0.0)), elt));
    return c.binary<smp::SubOp>(pos, neg);
  });
  t["Floor"] = activation(
      [](ActivationChain &c, Value x, NodeContext &) { return c.floor(x); });
  t["Ceil"] = activation([](ActivationChain &c, Value x, NodeContext &) {
    return c.unary<smp::NegOp>(c.floor(c.unary<smp::NegOp>(x)));
  });
  // Round: half to even (ONNX, torch.round): floor(x + 0.5), one less on a
  // tie that lands on an odd number.
  t["Round"] = activation([](ActivationChain &c, Value x, NodeContext &) {
    if (!isa<FloatType>(tensorType(x).getElementType()))
      return x;
    Value f = c.floor(c.binary<smp::AddOp>(x, c.scalar(x, 0.5)));
    Value tie =
        c.binary<smp::EqualOp>(c.binary<smp::SubOp>(f, x), c.scalar(x, 0.5));
    Value odd = c.binary<smp::EqualOp>(
        c.binary<smp::ModOp>(f, c.scalar(x, 2.0)), c.scalar(x, 1.0));
    return c.where(c.binary<smp::AndOp>(tie, odd),
                   c.binary<smp::SubOp>(f, c.scalar(x, 1.0)), f);
  });
  // IsInf(x): x == +inf or x == -inf (detect_positive, detect_negative).
  t["IsInf"] = activation([](ActivationChain &c, Value x, NodeContext &nc) {
    Value pos = nc.attrInt("detect_positive", 1) != 0
                    ? c.binary<smp::EqualOp>(x, c.scalar(x, INFINITY))
                    : Value();
    Value neg = nc.attrInt("detect_negative", 1) != 0
                    ? c.binary<smp::EqualOp>(x, c.scalar(x, -INFINITY))
                    : Value();
    if (pos && neg)
      return c.binary<smp::OrOp>(pos, neg);
    if (pos || neg)
      return pos ? pos : neg;
    return c.binary<smp::LessOp>(x, x); // detects nothing: all false
  });
  // PRelu(x, slope): x where x > 0, else slope * x (the slope broadcast to
  // x, as nn.PReLU's [C, 1, 1] for NCHW); at 0 the gradient is the slope's,
  // as PyTorch's.
  t["PRelu"] = [](NodeContext &nc) -> llvm::Error {
    auto in = nc.inputs(2);
    if (!in)
      return in.takeError();
    Value x = (*in)[0], slope = (*in)[1];
    // Before opset 7 a 1-D slope of C values is per channel (dim 1).
    SmallVector<int64_t> xs = shapeOf(x), ss = shapeOf(slope);
    if (nc.opset() < 7 && ss.size() == 1 && xs.size() > 2 && ss[0] > 1 &&
        ss[0] == xs[1]) {
      SmallVector<int64_t> perChannel(xs.size() - 1, 1);
      perChannel[0] = ss[0];
      auto r = nc.reshape(slope, perChannel);
      if (!r)
        return r.takeError();
      slope = *r;
    }
    ActivationChain c(nc);
    Value y = c.positiveOr(x, c.binary<smp::MulOp>(x, slope));
    return c.finish(y);
  };
}

} // namespace smp::onnx_frontend
