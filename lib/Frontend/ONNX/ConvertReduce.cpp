//===- ConvertReduce.cpp - ONNX reductions, softmax and CumSum -> smp -----===//
//
// ReduceSum/Mean/Max map to smp ops; ReduceMin, L1, L2, SumSquare, LogSum
// and LogSumExp are compositions of them (gradients included); ReduceProd
// is folded where its input is a constant (shape arithmetic) and refused
// otherwise. ArgMax and ArgMin are reductions over the indices where x
// equals its extreme; TopK is K such passes, masking each pick out.
//

#include "Chain.h"
#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

#include <cmath>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// The reductions smp composes from reduce_sum, reduce_mean and reduce_max.
enum class Reduce {
  Sum,
  Mean,
  Max,
  Min,
  L1,
  L2,
  SumSquare,
  LogSum,
  LogSumExp,
  Prod
};

/// The node's axes (every dim when none are given; nullopt with
/// noop_with_empty_axes); `axesInputOpset`: the opset from which axes is an
/// input, not an attribute.
llvm::Expected<std::optional<SmallVector<int64_t>>>
reduceAxes(NodeContext &nc, int64_t rank, int axesInputOpset) {
  SmallVector<int64_t> axes;
  if (nc.opset() >= axesInputOpset) {
    if (nc.hasInput(1)) {
      auto values = nc.constantInts(1, "axes");
      if (!values)
        return values.takeError();
      axes = *values;
    }
  } else {
    axes = nc.attrInts("axes");
  }
  if (axes.empty()) {
    if (nc.attrInt("noop_with_empty_axes", 0) != 0)
      return std::nullopt;
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  return axes;
}

/// ReduceProd of a constant (shape arithmetic: torch.onnx.export's std and
/// var count their elements with it), folded here.
llvm::Error foldReduceProd(NodeContext &nc, Value x, ArrayRef<int64_t> axes,
                           bool keep) {
  DenseElementsAttr c = nc.constantInput(0);
  if (!c)
    return nc.error("ReduceProd of a computed tensor is not supported (only "
                    "of constants: shape arithmetic)");
  SmallVector<int64_t> shape = shapeOf(x), out;
  SmallVector<bool> reduced(shape.size(), false);
  for (int64_t a : axes) {
    auto axis = normalizeAxis(a, shape.size());
    if (!axis)
      return nc.error("axis " + llvm::Twine(a) + " out of range");
    reduced[*axis] = true;
  }
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d] || keep)
      out.push_back(reduced[d] ? 1 : shape[d]);
  bool isFloat = isa<FloatType>(c.getElementType());
  SmallVector<double> vals;
  for (auto v : c.getValues<Attribute>())
    vals.push_back(isFloat ? cast<FloatAttr>(v).getValueAsDouble()
                           : double(cast<IntegerAttr>(v).getInt()));
  int64_t n = 1;
  for (int64_t d : out)
    n *= d;
  SmallVector<double> prod(n, 1.0);
  for (size_t k = 0; k < vals.size(); ++k) { // k -> its output element
    int64_t rest = k, index = 0, stride = 1;
    for (int64_t d = shape.size() - 1; d >= 0; --d) {
      int64_t i = rest % shape[d];
      rest /= shape[d];
      if (!reduced[d]) {
        index += i * stride;
        stride *= shape[d];
      }
    }
    prod[index] *= vals[k];
  }
  nc.setOutput(0, nc.constantOf(c.getElementType(), out, prod));
  return llvm::Error::success();
}

template <Reduce kind, int axesInputOpset>
llvm::Error convertReduce(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  auto axesOr = reduceAxes(nc, tensorType(*x).getRank(), axesInputOpset);
  if (!axesOr)
    return axesOr.takeError();
  if (!*axesOr) {
    nc.setOutput(0, *x);
    return llvm::Error::success();
  }
  bool keep = nc.attrInt("keepdims", 1) != 0;
  if constexpr (kind == Reduce::Prod)
    return foldReduceProd(nc, *x, **axesOr, keep);
  auto axes = nc.builder().getDenseI64ArrayAttr(**axesOr);
  Chain c(nc);
  auto sum = [&](Value v, bool k) {
    return c.make<smp::ReduceSumOp>(v, axes, k);
  };
  Value v = *x, y;
  switch (kind) {
  case Reduce::Sum:
    y = sum(v, keep);
    break;
  case Reduce::Mean:
    y = c.make<smp::ReduceMeanOp>(v, axes, keep);
    break;
  case Reduce::Max:
    y = c.make<smp::ReduceMaxOp>(v, axes, keep);
    break;
  case Reduce::Min: // -max(-x)
    y = c.unary<smp::NegOp>(
        c.make<smp::ReduceMaxOp>(c.unary<smp::NegOp>(v), axes, keep));
    break;
  case Reduce::L1:
    y = sum(c.unary<smp::AbsOp>(v), keep);
    break;
  case Reduce::SumSquare:
    y = sum(c.binary<smp::MulOp>(v, v), keep);
    break;
  case Reduce::L2: {
    // sqrt(sum x^2), 0 (and a zero gradient, as PyTorch's norm) where the
    // sum is 0: sqrt's gradient there would be infinite.
    Value s = sum(c.binary<smp::MulOp>(v, v), keep);
    Value zero = c.binary<smp::EqualOp>(s, c.scalar(s, 0.0));
    Value safe = c.where(zero, c.scalar(s, 1.0), s);
    y = c.where(zero, c.scalar(s, 0.0), c.unary<smp::SqrtOp>(safe));
    break;
  }
  case Reduce::LogSum:
    y = c.unary<smp::LogOp>(sum(v, keep));
    break;
  case Reduce::LogSumExp: { // m + log(sum(exp(x - m))), m the max
    Value m = c.make<smp::ReduceMaxOp>(v, axes, true);
    Value s = sum(c.unary<smp::ExpOp>(c.binary<smp::SubOp>(v, m)), true);
    y = c.binary<smp::AddOp>(c.unary<smp::LogOp>(s), m);
    if (!keep && !c.failed()) {
      SmallVector<int64_t> shape;
      llvm::SmallDenseSet<int64_t> gone;
      for (int64_t a : **axesOr)
        gone.insert(a < 0 ? a + tensorType(v).getRank() : a);
      for (auto [d, n] : llvm::enumerate(shapeOf(y)))
        if (!gone.count(d))
          shape.push_back(n);
      y = c.reshape(y, shape);
    }
    break;
  }
  case Reduce::Prod:
    break;
  }
  return c.finish(y);
}

/// The positions 0..n-1 along `axis` of a rank-`rank` tensor ([1.., n, ..1]),
/// negated for `negate`.
Value positions(NodeContext &nc, int64_t rank, int64_t axis, int64_t n,
                bool negate) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  SmallVector<double> values;
  for (int64_t i = 0; i < n; ++i)
    values.push_back(negate ? -i : i);
  return nc.constantOf(nc.builder().getI64Type(), shape, values);
}

/// The first (or last) position along `axes` where `eq` holds: the largest
/// of the (negated, for the first) positions it selects. `pos` is
/// positions(.., negate = !last).
Value matchIndex(Chain &c, NodeContext &nc, Value eq, Value pos, int64_t n,
                 DenseI64ArrayAttr axes, bool last, bool keep) {
  Value none = nc.splat(nc.builder().getI64Type(), {}, last ? -1 : -n);
  Value pick = c.make<smp::ReduceMaxOp>(c.where(eq, pos, none), axes, keep);
  return last ? pick : c.unary<smp::NegOp>(pick);
}

/// ArgMax/ArgMin(x, axis, keepdims, select_last_index): the first (or
/// last) index along `axis` where x equals its max (ArgMin: -x's), as
/// reductions over the indices of the matching positions. No gradient.
template <bool isMin> llvm::Error convertArgExtreme(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  SmallVector<int64_t> shape = shapeOf(*x);
  auto axis =
      normalizeAxis(nc.attrInt("axis", 0), std::max<int64_t>(shape.size(), 1));
  if (!axis || shape.empty())
    return nc.error("axis " + llvm::Twine(nc.attrInt("axis", 0)) +
                    " out of range for rank " + llvm::Twine(shape.size()));
  bool last = nc.attrInt("select_last_index", 0) != 0;
  Chain c(nc);
  Value v = isMin ? c.unary<smp::NegOp>(*x) : *x;
  auto axes = nc.builder().getDenseI64ArrayAttr({*axis});
  Value eq = c.binary<smp::EqualOp>(v, c.make<smp::ReduceMaxOp>(v, axes, true));
  int64_t n = shape[*axis];
  Value pos = positions(nc, shape.size(), *axis, n, !last);
  return c.finish(matchIndex(c, nc, eq, pos, n, axes, last,
                             nc.attrInt("keepdims", 1) != 0));
}

/// TopK(x, k, axis, largest, sorted) for k up to kMaxTopK: k passes, each
/// taking the first index of the current extreme (ArgMax's composition) and
/// masking it out; Values = GatherElements(x, Indices), so the gradient
/// reaches exactly the selected elements, as PyTorch's torch.topk. Sorted
/// by construction (largest first, or smallest first).
constexpr int64_t kMaxTopK = 64;

llvm::Error convertTopK(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  SmallVector<int64_t> shape = shapeOf(*x);
  int64_t rank = shape.size();
  auto axis = nc.attrAxis(-1, std::max<int64_t>(rank, 1));
  if (!axis)
    return axis.takeError();
  int64_t k;
  if (nc.opset() < 10) {
    k = nc.attrInt("k", 0);
  } else {
    auto ks = nc.constantInt(1, "K");
    if (!ks)
      return ks.takeError();
    k = *ks;
  }
  int64_t n = rank ? shape[*axis] : 0;
  if (k < 1 || k > n)
    return nc.error("K " + llvm::Twine(k) + " must be in [1, " +
                    llvm::Twine(n) + "]");
  if (k > kMaxTopK)
    return nc.error("K " + llvm::Twine(k) + " is over " +
                    llvm::Twine(kMaxTopK) +
                    " (TopK is composed of K passes over the input; "
                    "torch.sort exports as TopK with K = the whole dim)");
  if (!isa<FloatType>(tensorType(*x).getElementType()))
    return nc.error("only float inputs are supported");
  auto &b = nc.builder();
  Chain c(nc);
  bool largest = nc.attrInt("largest", 1) != 0;
  Value v = largest ? *x : c.unary<smp::NegOp>(*x);
  auto axes = b.getDenseI64ArrayAttr({*axis});
  Value negIdx = positions(nc, rank, *axis, n, /*negate=*/true);
  Value masked = nc.splat(tensorType(*x).getElementType(), {}, -INFINITY);
  // Picked positions are masked to -inf and excluded from the next passes'
  // matches (an input that holds -inf itself would otherwise be picked
  // twice).
  SmallVector<Value> picks;
  Value iota = positions(nc, rank, *axis, n, /*negate=*/false), picked;
  for (int64_t j = 0; j < k && !c.failed(); ++j) {
    Value eq =
        c.binary<smp::EqualOp>(v, c.make<smp::ReduceMaxOp>(v, axes, true));
    if (picked)
      eq = c.binary<smp::AndOp>(eq, c.unary<smp::NotOp>(picked));
    Value at = matchIndex(c, nc, eq, negIdx, n, axes, /*last=*/false, true);
    picks.push_back(at);
    if (j + 1 < k) { // mask the pick out for the next pass
      Value now = c.binary<smp::EqualOp>(iota, at);
      picked = picked ? c.binary<smp::OrOp>(picked, now) : now;
      v = c.where(now, masked, v);
    }
  }
  Value indices =
      picks.size() == 1
          ? picks.front()
          : c.make<smp::ConcatOp>(picks, b.getI64IntegerAttr(*axis));
  Value vals =
      c.make<smp::GatherElementsOp>(*x, indices, b.getI64IntegerAttr(*axis));
  if (auto err = c.finish(vals, 0))
    return err;
  return nc.hasOutput(1) ? c.finish(indices, 1) : llvm::Error::success();
}

/// Softmax/LogSoftmax. Before opset 13 the op flattens the input into
/// [prod(dims < axis), prod(dims >= axis)] and normalises each row.
template <typename OpT> llvm::Error convertSoftmax(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  auto type = tensorType(*x);
  int64_t rank = type.getRank();
  bool legacy = nc.opset() < 13;
  int64_t rawAxis = nc.attrInt("axis", legacy ? 1 : -1);
  auto axis = normalizeAxis(rawAxis, std::max<int64_t>(rank, 1));
  if (!axis)
    return nc.error("axis " + llvm::Twine(rawAxis) + " out of range for rank " +
                    llvm::Twine(rank));
  if (!legacy || *axis == rank - 1)
    return nc.output(nc.create<OpT>(*x, nc.builder().getI64IntegerAttr(*axis)));
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < *axis ? rows : cols) *= type.getDimSize(d);
  auto flat = nc.reshape(*x, {rows, cols});
  if (!flat)
    return flat.takeError();
  auto y = nc.create<OpT>(*flat, nc.builder().getI64IntegerAttr(1));
  if (!y)
    return y.takeError();
  return nc.output(nc.reshape(*y, type.getShape()));
}

/// CumSum(x, axis): the axis (a scalar or one-element tensor) must be a
/// compile-time constant; `exclusive` and `reverse` map to smp.cumsum's.
llvm::Error convertCumSum(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  Value x = (*in)[0];
  auto axisValue = nc.constantInt(1, "axis");
  if (!axisValue)
    return axisValue.takeError();
  int64_t rank = tensorType(x).getRank();
  auto axis = normalizeAxis(*axisValue, rank);
  if (!axis)
    return nc.error("axis " + llvm::Twine(*axisValue) +
                    " out of range for rank " + llvm::Twine(rank));
  auto &b = nc.builder();
  return nc.output(nc.create<smp::CumSumOp>(
      x, b.getI64IntegerAttr(*axis),
      b.getBoolAttr(nc.attrInt("exclusive", 0) != 0),
      b.getBoolAttr(nc.attrInt("reverse", 0) != 0)));
}

} // namespace

void registerReduceConverters(ConverterTable &t) {
  t["ReduceSum"] = convertReduce<Reduce::Sum, 13>;
  t["ReduceMean"] = convertReduce<Reduce::Mean, 18>;
  t["ReduceMax"] = convertReduce<Reduce::Max, 18>;
  t["ReduceMin"] = convertReduce<Reduce::Min, 18>;
  t["ReduceL1"] = convertReduce<Reduce::L1, 18>;
  t["ReduceL2"] = convertReduce<Reduce::L2, 18>;
  t["ReduceSumSquare"] = convertReduce<Reduce::SumSquare, 18>;
  t["ReduceLogSum"] = convertReduce<Reduce::LogSum, 18>;
  t["ReduceLogSumExp"] = convertReduce<Reduce::LogSumExp, 18>;
  t["ReduceProd"] = convertReduce<Reduce::Prod, 18>;
  t["ArgMax"] = convertArgExtreme<false>;
  t["ArgMin"] = convertArgExtreme<true>;
  t["TopK"] = convertTopK;
  t["Softmax"] = convertSoftmax<smp::SoftmaxOp>;
  t["LogSoftmax"] = convertSoftmax<smp::LogSoftmaxOp>;
  t["CumSum"] = convertCumSum;
}

} // namespace smp::onnx_frontend
