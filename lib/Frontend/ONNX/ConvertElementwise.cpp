//===- ConvertElementwise.cpp - ONNX elementwise ops -> smp ---------------===//
//
// Unary math, binary arithmetic/comparison/logic (numpy broadcasting),
// variadic Max/Min/Sum, Where, Cast, Clip, activations with attributes, Mod.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "TensorData.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

template <typename OpT> llvm::Error convertUnary(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  return nc.output(nc.create<OpT>(*x));
}

/// Before opset 7, binary ops broadcast only with `broadcast=1`, and `axis`
/// places B's dims at A's dim `axis` (not right-aligned). Returns B reshaped
/// so that numpy broadcasting gives the legacy result.
llvm::Expected<Value> legacyBroadcast(NodeContext &nc, Value a, Value b) {
  if (nc.opset() >= 7 || nc.attrInt("broadcast", 0) == 0 ||
      !nc.hasAttr("axis"))
    return b;
  int64_t rankA = tensorType(a).getRank(), rankB = tensorType(b).getRank();
  int64_t axis = nc.attrInt("axis", 0);
  if (axis < 0)
    axis += rankA;
  if (axis < 0 || axis + rankB > rankA)
    return nc.error("legacy broadcast axis " + llvm::Twine(axis) +
                    " does not fit");
  SmallVector<int64_t> shape(shapeOf(b));
  shape.append(rankA - axis - rankB, 1);
  return nc.reshape(b, shape);
}

template <typename OpT> llvm::Error convertBinary(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  Value a = (*in)[0];
  auto b = legacyBroadcast(nc, a, (*in)[1]);
  if (!b)
    return b.takeError();
  return nc.output(nc.create<OpT>(nc.placeholder(), a, *b));
}

/// Max/Min/Sum take one or more inputs.
template <typename OpT> llvm::Error convertVariadic(NodeContext &nc) {
  auto acc = nc.input(0);
  if (!acc)
    return acc.takeError();
  Value result = *acc;
  for (unsigned i = 1; i < nc.numInputs(); ++i) {
    auto next = nc.input(i);
    if (!next)
      return next.takeError();
    auto y = nc.create<OpT>(nc.placeholder(), result, *next);
    if (!y)
      return y.takeError();
    result = *y;
  }
  nc.setOutput(0, result);
  return llvm::Error::success();
}

/// a <= b is (a < b) || (a == b), a >= b is (a > b) || (a == b): both are
/// false when either side is NaN, as ONNX requires (unlike !(a > b)).
template <typename StrictOp> llvm::Error convertOrEqual(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  Value a = (*in)[0], b = (*in)[1];
  auto strict = nc.create<StrictOp>(nc.placeholder(), a, b);
  if (!strict)
    return strict.takeError();
  auto equal = nc.create<smp::EqualOp>(nc.placeholder(), a, b);
  if (!equal)
    return equal.takeError();
  return nc.output(
      nc.create<smp::OrOp>(nc.placeholder(), *strict, *equal));
}

llvm::Error convertPow(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  Value a = (*in)[0];
  // ONNX allows a different exponent type; compute in the base's type.
  auto exponent = nc.castTo((*in)[1], tensorType(a).getElementType());
  if (!exponent)
    return exponent.takeError();
  return nc.output(nc.create<smp::PowOp>(nc.placeholder(), a, *exponent));
}

/// Mod(a, b): fmod=0 is the floor remainder (the divisor's sign), fmod=1
/// C's fmod (the dividend's sign); both are smp.mod. ONNX requires fmod=1
/// for floats (onnxruntime refuses fmod=0 on them), and so does smp.
llvm::Error convertMod(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  Value a = (*in)[0], b = (*in)[1];
  bool fmod = nc.attrInt("fmod", 0) != 0;
  if (!fmod && isa<FloatType>(tensorType(a).getElementType()))
    return nc.error("fmod=0 on floating-point inputs is not defined by ONNX "
                    "(Mod requires fmod=1 for floats)");
  return nc.output(nc.create<smp::ModOp>(nc.placeholder(), a, b,
                                         nc.builder().getBoolAttr(fmod)));
}

llvm::Error convertIdentity(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x || !nc.stopsGradient())
    return nc.output(std::move(x));
  // PyTorch's `.detach()`: a copy autodiff treats as a constant (kept
  // until smp-build-gradients has built the gradients).
  auto op = smp::CastOp::create(nc.builder(), nc.loc(), x->getType(), *x);
  op->setAttr(smp::SmpDialect::kNoGradAttr, nc.builder().getUnitAttr());
  auto results = nc.finish(op);
  if (!results)
    return results.takeError();
  return nc.output(results->front());
}

llvm::Error convertWhere(NodeContext &nc) {
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  return nc.output(nc.create<smp::WhereOp>(nc.placeholder(), (*in)[0],
                                           (*in)[1], (*in)[2]));
}

llvm::Error convertCast(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  if (!nc.hasAttr("to"))
    return nc.error("missing attribute 'to'");
  Type to = elementType(nc.context(), static_cast<int32_t>(nc.attrInt("to", 0)));
  if (!to)
    return nc.error("cannot cast to unsupported type " +
                    llvm::Twine(nc.attrInt("to", 0)));
  return nc.output(nc.castTo(*x, to));
}

/// IsNaN(x) = not(x == x): NaN is the only value unequal to itself.
llvm::Error convertIsNaN(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  if (!isa<FloatType>(cast<ShapedType>(x->getType()).getElementType()))
    return nc.error("IsNaN needs a float input");
  auto same = nc.create<smp::EqualOp>(nc.placeholder(), *x, *x);
  if (!same)
    return same.takeError();
  return nc.output(nc.create<smp::NotOp>(nc.placeholder(), *same));
}

/// CastLike(x, like): x cast to like's element type.
llvm::Error convertCastLike(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  Type like = cast<ShapedType>((*in)[1].getType()).getElementType();
  return nc.output(nc.castTo((*in)[0], like));
}

llvm::Error convertLeakyRelu(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  return nc.output(nc.create<smp::LeakyReluOp>(
      *x, nc.builder().getF32FloatAttr(nc.attrFloat("alpha", 0.01f))));
}

llvm::Error convertGelu(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  std::string approx = nc.attrString("approximate", "none");
  if (approx != "none" && approx != "tanh")
    return nc.error("unknown approximate='" + approx + "'");
  return nc.output(nc.create<smp::GeluOp>(
      *x, approx == "tanh" ? smp::GeluApproximation::tanh
                           : smp::GeluApproximation::none));
}

/// Clip(x, min, max): bounds are inputs (opset >= 11) or attributes;
/// min(max(x, lo), hi), both `strict`: x exactly at a bound gets no
/// gradient, as PyTorch's nn.ReLU6 and nn.Hardtanh (ReLU6 at 0: a
/// normalised constant channel with a zero bias), where max/min's own
/// gradient splits a tie in half. torch.clamp, which torch.onnx.export
/// writes as the same Clip, passes the gradient at a bound (1): the file
/// cannot tell them apart, and ReLU6 is the common one.
llvm::Error convertClip(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  Value result = *x;
  auto bound = [&](unsigned idx, const char *attr,
                   bool isMax) -> llvm::Error {
    Value b;
    if (nc.opset() >= 11) {
      auto in = nc.optionalInput(idx);
      if (!in)
        return in.takeError();
      b = *in;
    } else if (nc.hasAttr(attr)) {
      b = nc.scalarLike(*x, nc.attrFloat(attr, 0));
    }
    if (!b)
      return llvm::Error::success();
    auto y = isMax ? nc.create<smp::MinOp>(nc.placeholder(), result, b,
                                           /*strict=*/true)
                   : nc.create<smp::MaxOp>(nc.placeholder(), result, b,
                                           /*strict=*/true);
    if (!y)
      return y.takeError();
    result = *y;
    return llvm::Error::success();
  };
  if (auto err = bound(1, "min", false))
    return err;
  if (auto err = bound(2, "max", true))
    return err;
  nc.setOutput(0, result);
  return llvm::Error::success();
}

} // namespace

void registerElementwiseConverters(ConverterTable &t) {
  t["Neg"] = convertUnary<smp::NegOp>;
  t["Abs"] = convertUnary<smp::AbsOp>;
  t["Exp"] = convertUnary<smp::ExpOp>;
  t["Log"] = convertUnary<smp::LogOp>;
  t["Sqrt"] = convertUnary<smp::SqrtOp>;
  t["Reciprocal"] = convertUnary<smp::ReciprocalOp>;
  t["Tanh"] = convertUnary<smp::TanhOp>;
  t["Erf"] = convertUnary<smp::ErfOp>;
  t["Sigmoid"] = convertUnary<smp::SigmoidOp>;
  t["Relu"] = convertUnary<smp::ReluOp>;
  t["Sin"] = convertUnary<smp::SinOp>;
  t["Cos"] = convertUnary<smp::CosOp>;
  t["Not"] = convertUnary<smp::NotOp>;
  t["Add"] = convertBinary<smp::AddOp>;
  t["Sub"] = convertBinary<smp::SubOp>;
  t["Mul"] = convertBinary<smp::MulOp>;
  t["Div"] = convertBinary<smp::DivOp>;
  t["Equal"] = convertBinary<smp::EqualOp>;
  t["Less"] = convertBinary<smp::LessOp>;
  t["Greater"] = convertBinary<smp::GreaterOp>;
  t["LessOrEqual"] = convertOrEqual<smp::LessOp>;
  t["GreaterOrEqual"] = convertOrEqual<smp::GreaterOp>;
  t["And"] = convertBinary<smp::AndOp>;
  t["Or"] = convertBinary<smp::OrOp>;
  t["Pow"] = convertPow;
  t["Mod"] = convertMod;
  t["Max"] = convertVariadic<smp::MaxOp>;
  t["Min"] = convertVariadic<smp::MinOp>;
  t["Sum"] = convertVariadic<smp::AddOp>;
  t["Where"] = convertWhere;
  t["Cast"] = convertCast;
  t["CastLike"] = convertCastLike;
  t["IsNaN"] = convertIsNaN;
  t["Identity"] = convertIdentity;
  t["LeakyRelu"] = convertLeakyRelu;
  t["Gelu"] = convertGelu;
  t["Clip"] = convertClip;
}

} // namespace smp::onnx_frontend
