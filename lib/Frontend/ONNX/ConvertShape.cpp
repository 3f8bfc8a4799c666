//===- ConvertShape.cpp - ONNX shape and data-movement ops -> smp ---------===//
//
// Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice,
// Gather, Expand, Shape, Size, ConstantOfShape, Range, Constant, Dropout,
// Trilu, Tile. Shape operands must be compile-time constants; the folder
// turns shape subgraphs into constants once symbolic dims are bound.
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "SharedInitializers.h"
#include "TensorData.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "smp/Support/CheckedMath.h"

#include <cmath>
#include <cstdio>

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

Value i64Constant(NodeContext &nc, ArrayRef<int64_t> values,
                  ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, nc.builder().getI64Type());
  return smp::ConstantOp::create(nc.builder(), nc.loc(),
                                 DenseIntElementsAttr::get(type, values));
}

/// Axes from the `axes` input (opset >= `inputOpset`) or attribute.
llvm::Expected<SmallVector<int64_t>> axesOf(NodeContext &nc, int inputOpset,
                                            unsigned inputIndex) {
  if (nc.opset() >= inputOpset) {
    if (!nc.hasInput(inputIndex))
      return SmallVector<int64_t>();
    return nc.constantInts(inputIndex, "axes");
  }
  return nc.attrInts("axes");
}

/// Input 0 and the constant integers of input 1 (a Reshape's or Expand's
/// shape, a Tile's repeats).
struct InputAndInts {
  Value x;
  SmallVector<int64_t> ints;
};
llvm::Expected<InputAndInts> inputAndInts(NodeContext &nc,
                                          llvm::StringRef what) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  auto ints = nc.constantInts(1, what);
  if (!ints)
    return ints.takeError();
  return InputAndInts{*x, std::move(*ints)};
}

llvm::Error convertReshape(NodeContext &nc) {
  auto args = inputAndInts(nc, "shape");
  if (!args)
    return args.takeError();
  auto &[x, shape] = *args;
  auto in = shapeOf(x);
  bool allowZero = nc.attrInt("allowzero", 0) != 0;
  SmallVector<int64_t> out;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return nc.error("shape has 0 at index " + llvm::Twine(i) +
                        " but the input has rank " + llvm::Twine(in.size()));
      d = in[i];
    }
    if (d == -1) {
      if (inferred >= 0)
        return nc.error("shape has more than one -1");
      inferred = static_cast<int>(i);
    } else if (d < 0) {
      return nc.error("shape has invalid dim " + llvm::Twine(d));
    } else {
      auto product = checkedMul(known, d);
      if (!product)
        return nc.error("shape " + shapeToString(shape) + " overflows");
      known = *product;
    }
    out.push_back(d);
  }
  int64_t numel = tensorType(x).getNumElements();
  if (inferred >= 0) {
    if (known == 0 || numel % known != 0)
      return nc.error("cannot reshape " + shapeToString(in) + " to " +
                      shapeToString(shape));
    out[inferred] = numel / known;
  }
  auto total = checkedNumElements(out);
  if (!total || *total != numel)
    return nc.error("cannot reshape " + shapeToString(in) + " (" +
                    llvm::Twine(numel) + " elements) to " +
                    shapeToString(out));
  return nc.output(nc.reshape(x, out));
}

llvm::Error convertFlatten(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  auto in = shapeOf(*x);
  int64_t rank = in.size(), axis = nc.attrInt("axis", 1);
  if (axis < -rank || axis > rank)
    return nc.error("axis " + llvm::Twine(axis) + " out of range for rank " +
                    llvm::Twine(rank));
  if (axis < 0)
    axis += rank;
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? rows : cols) *= in[d];
  return nc.output(nc.reshape(*x, {rows, cols}));
}

llvm::Error convertSqueeze(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  auto axes = axesOf(nc, 13, 1);
  if (!axes)
    return axes.takeError();
  auto in = shapeOf(*x);
  int64_t rank = in.size();
  SmallVector<bool> drop(rank, false);
  if (axes->empty()) {
    for (int64_t d = 0; d < rank; ++d)
      drop[d] = in[d] == 1;
  }
  for (int64_t a : *axes) {
    auto n = normalizeAxis(a, rank);
    if (!n)
      return nc.error("axis " + llvm::Twine(a) + " out of range for rank " +
                      llvm::Twine(rank));
    if (in[*n] != 1)
      return nc.error("cannot squeeze dim " + llvm::Twine(*n) + " of size " +
                      llvm::Twine(in[*n]));
    drop[*n] = true;
  }
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d)
    if (!drop[d])
      out.push_back(in[d]);
  return nc.output(nc.reshape(*x, out));
}

llvm::Error convertUnsqueeze(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  auto axes = axesOf(nc, 13, 1);
  if (!axes)
    return axes.takeError();
  auto in = shapeOf(*x);
  int64_t outRank = in.size() + axes->size();
  SmallVector<bool> inserted(outRank, false);
  for (int64_t a : *axes) {
    auto n = normalizeAxis(a, outRank);
    if (!n || inserted[*n])
      return nc.error("invalid or repeated axis " + llvm::Twine(a));
    inserted[*n] = true;
  }
  SmallVector<int64_t> out;
  size_t next = 0;
  for (int64_t d = 0; d < outRank; ++d)
    out.push_back(inserted[d] ? 1 : in[next++]);
  return nc.output(nc.reshape(*x, out));
}

llvm::Error convertTranspose(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  SmallVector<int64_t> perm = nc.attrInts("perm");
  if (!nc.hasAttr("perm"))
    for (int64_t d = tensorType(*x).getRank(); d-- > 0;)
      perm.push_back(d);
  return nc.output(nc.create<smp::TransposeOp>(
      nc.placeholder(), *x, nc.builder().getDenseI64ArrayAttr(perm)));
}

llvm::Error convertConcat(NodeContext &nc) {
  SmallVector<Value> values;
  for (unsigned i = 0; i < nc.numInputs(); ++i) {
    auto v = nc.optionalInput(i);
    if (!v)
      return v.takeError();
    if (*v)
      values.push_back(*v);
  }
  if (!nc.hasAttr("axis"))
    return nc.error("missing attribute 'axis'");
  return nc.output(nc.create<smp::ConcatOp>(
      nc.placeholder(), values,
      nc.builder().getI64IntegerAttr(nc.attrInt("axis", 0))));
}

llvm::Error convertSplit(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  auto in = shapeOf(*x);
  auto axis = nc.attrAxis(0, in.size());
  if (!axis)
    return axis.takeError();
  SmallVector<int64_t> sizes;
  if (nc.opset() >= 13 && nc.hasInput(1)) {
    auto s = nc.constantInts(1, "split");
    if (!s)
      return s.takeError();
    sizes = *s;
  } else if (nc.opset() < 13 && nc.hasAttr("split")) {
    sizes = nc.attrInts("split");
  } else {
    int64_t parts = nc.hasAttr("num_outputs") ? nc.attrInt("num_outputs", 1)
                                              : nc.numOutputs();
    if (parts <= 0)
      return nc.error("cannot split into " + llvm::Twine(parts) + " parts");
    if (parts > nc.numOutputs()) // (a huge num_outputs looped for ages)
      return nc.error(llvm::Twine(parts) + " split sizes for " +
                      llvm::Twine(nc.numOutputs()) + " outputs");
    // parts is at most the number of outputs: no overflow below.
    int64_t dim = in[*axis], chunk = dim / parts + (dim % parts != 0);
    for (int64_t p = 0; p < parts; ++p)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, dim - p * chunk)));
  }
  if (static_cast<int64_t>(sizes.size()) != nc.numOutputs())
    return nc.error(llvm::Twine(sizes.size()) + " split sizes for " +
                    llvm::Twine(nc.numOutputs()) + " outputs");
  SmallVector<Type> types(sizes.size(), nc.placeholder());
  auto parts = nc.createMulti<smp::SplitOp>(
      TypeRange(types), *x, nc.builder().getI64IntegerAttr(*axis),
      nc.builder().getDenseI64ArrayAttr(sizes));
  if (!parts)
    return parts.takeError();
  for (auto [i, v] : llvm::enumerate(*parts))
    nc.setOutput(i, v);
  return llvm::Error::success();
}

llvm::Error convertSlice(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  auto in = shapeOf(*x);
  int64_t rank = in.size();
  SmallVector<int64_t> starts, ends, axes, steps;
  if (nc.opset() < 10) {
    starts = nc.attrInts("starts");
    ends = nc.attrInts("ends");
    axes = nc.attrInts("axes");
  } else {
    auto s = nc.constantInts(1, "starts");
    if (!s)
      return s.takeError();
    auto e = nc.constantInts(2, "ends");
    if (!e)
      return e.takeError();
    starts = *s;
    ends = *e;
    if (nc.hasInput(3)) {
      auto a = nc.constantInts(3, "axes");
      if (!a)
        return a.takeError();
      axes = *a;
    }
    if (nc.hasInput(4)) {
      auto st = nc.constantInts(4, "steps");
      if (!st)
        return st.takeError();
      steps = *st;
    }
  }
  if (starts.size() != ends.size())
    return nc.error("starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return nc.error("starts, ends, axes and steps differ in length");
  SmallVector<int64_t> outStart(rank, 0), outLimit(in), outStep(rank, 1);
  SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = normalizeAxis(axes[i], rank);
    if (!axis || seen[*axis])
      return nc.error("invalid or repeated axis " + llvm::Twine(axes[i]));
    seen[*axis] = true;
    int64_t dim = in[*axis], step = steps[i];
    if (step == 0)
      return nc.error("step 0 on axis " + llvm::Twine(*axis));
    auto clampIndex = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0)
        v = v < -dim ? lo : v + dim;
      return std::clamp(v, lo, hi);
    };
    int64_t start, end;
    if (step > 0) {
      start = clampIndex(starts[i], 0, dim);
      end = clampIndex(ends[i], 0, dim);
    } else {
      // ONNX: with a negative step the start is clamped into [0, dim - 1]
      // and the end into [-1, dim - 1] (an empty dim slices nothing).
      start = dim == 0 ? -1 : clampIndex(starts[i], 0, dim - 1);
      end = ends[i] < -dim ? -1 : clampIndex(ends[i], -1, dim - 1);
    }
    outStart[*axis] = start;
    outLimit[*axis] = end;
    outStep[*axis] = step;
  }
  auto &b = nc.builder();
  return nc.output(nc.create<smp::SliceOp>(
      nc.placeholder(), *x, b.getDenseI64ArrayAttr(outStart),
      b.getDenseI64ArrayAttr(outLimit), b.getDenseI64ArrayAttr(outStep)));
}

llvm::Error convertGather(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  Value data = (*in)[0], indices = (*in)[1];
  auto axis = nc.attrAxis(0, tensorType(data).getRank());
  if (!axis)
    return axis.takeError();
  // ONNX allows int32/int64 indices only; anything else (a shape Cast to
  // float, say) would be read as integers below.
  Type idxElt = tensorType(indices).getElementType();
  if (!isa<IntegerType>(idxElt) || idxElt.isInteger(1)) {
    std::string got;
    llvm::raw_string_ostream(got) << idxElt;
    return nc.error("input '" + nc.node().input(1) +
                    "' (indices) must be an int32 or int64 tensor, got " +
                    got);
  }
  if (DenseElementsAttr idx = nc.constantInput(1)) {
    int64_t dim = tensorType(data).getDimSize(*axis);
    for (const APInt &v : idx.getValues<APInt>()) {
      int64_t i = v.getSExtValue();
      if (i < -dim || i >= dim)
        return nc.error("index " + llvm::Twine(i) + " out of range for dim " +
                        llvm::Twine(*axis) + " of size " + llvm::Twine(dim));
    }
  }
  // nn.Embedding(padding_idx=p) (the dynamo exporter's metadata says
  // aten.embedding(weight, ids, p)): row p gets no gradient from the lookup.
  IntegerAttr padding;
  llvm::StringRef fx = "";
  std::string meta = nodeMetadata(nc.node(), "pkg.torch.onnx.fx_node");
  fx = meta;
  if (*axis == 0 && fx.contains("aten.embedding.default](args = (")) {
    llvm::SmallVector<llvm::StringRef> args;
    fx.split("args = (").second.split(')').first.split(args, ',');
    int64_t p = -1;
    if (args.size() >= 3 && !args[2].trim().getAsInteger(10, p) && p >= 0 &&
        p < tensorType(data).getDimSize(0))
      padding = nc.builder().getI64IntegerAttr(p);
  }
  // The same from the smp.export sidecar (the TorchScript exporter records
  // no padding_idx in the file).
  if (int64_t p = *axis == 0 ? nc.paddingRow(nc.node().input(0)) : -1;
      p >= 0) {
    if (p >= tensorType(data).getDimSize(0))
      return nc.error("padding row " + llvm::Twine(p) + " of '" +
                      nc.node().input(0) + "' (smp.export sidecar) is not a "
                      "row of its " +
                      llvm::Twine(tensorType(data).getDimSize(0)) + " rows");
    if (padding && padding.getInt() != p)
      return nc.error("the smp.export sidecar gives '" + nc.node().input(0) +
                      "' padding row " + llvm::Twine(p) +
                      " but the node's metadata says " +
                      llvm::Twine(padding.getInt()));
    padding = nc.builder().getI64IntegerAttr(p);
  }
  return nc.output(nc.create<smp::GatherOp>(
      nc.placeholder(), data, indices, nc.builder().getI64IntegerAttr(*axis),
      padding));
}

llvm::Error convertExpand(NodeContext &nc) {
  auto args = inputAndInts(nc, "shape");
  if (!args)
    return args.takeError();
  auto &[x, shape] = *args;
  auto in = shapeOf(x);
  auto out = broadcastShapes(in, shape);
  if (!out || !checkedNumElements(*out))
    return nc.error("cannot expand " + shapeToString(in) + " to " +
                    shapeToString(shape));
  if (ArrayRef<int64_t>(*out) == ArrayRef<int64_t>(in)) {
    nc.setOutput(0, x);
    return llvm::Error::success();
  }
  return nc.output(
      nc.create<smp::ExpandOp>(tensorType(x).clone(*out), x));
}

llvm::Error convertShape(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  auto in = shapeOf(*x);
  int64_t rank = in.size();
  int64_t start = nc.attrInt("start", 0), end = nc.attrInt("end", rank);
  if (start < 0)
    start += rank;
  if (end < 0)
    end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  SmallVector<int64_t> dims(in.begin() + start, in.begin() + end);
  nc.setOutput(0, i64Constant(nc, dims, {static_cast<int64_t>(dims.size())}));
  return llvm::Error::success();
}

llvm::Error convertSize(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  nc.setOutput(0, i64Constant(nc, {tensorType(*x).getNumElements()}, {}));
  return llvm::Error::success();
}

llvm::Error convertConstantOfShape(NodeContext &nc) {
  auto shape = nc.constantInts(0, "shape");
  if (!shape)
    return shape.takeError();
  for (int64_t d : *shape)
    if (d < 0)
      return nc.error("negative dim " + llvm::Twine(d) + " in shape");
  if (!checkedNumElements(*shape))
    return nc.error("shape " + shapeToString(*shape) + " is too large");
  // A constant over kMaxConstantBytes is not made: nc.splat builds an
  // expand of one value, computed at run time.
  Type elt = nc.builder().getF32Type();
  double value = 0;
  if (const auto *attr = nc.attr("value")) {
    auto t = readTensor(nc.context(), attr->t(), nc.modelDir());
    if (!t)
      return nc.error(llvm::toString(t.takeError()));
    if (t->getNumElements() != 1)
      return nc.error("'value' must hold one element");
    elt = t->getElementType();
    value = isa<FloatType>(elt)
                ? (*t->getValues<APFloat>().begin()).convertToDouble()
                : static_cast<double>(
                      (*t->getValues<APInt>().begin()).getSExtValue());
  }
  nc.setOutput(0, nc.splat(elt, *shape, value));
  return llvm::Error::success();
}

/// The number of elements of an integer Range, max(ceil((limit - start) /
/// delta), 0), computed exactly in 64-bit unsigned arithmetic (through
/// double, limits past 2^53 gave a wrong count and wrong values).
static uint64_t integerRangeCount(int64_t start, int64_t limit,
                                  int64_t delta) {
  bool up = delta > 0;
  if (up ? limit <= start : limit >= start)
    return 0;
  uint64_t span = up ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                     : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
  uint64_t step = up ? static_cast<uint64_t>(delta)
                     : uint64_t(0) - static_cast<uint64_t>(delta);
  return span / step + (span % step != 0);
}

llvm::Error convertRange(NodeContext &nc) {
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  Type elt = tensorType((*in)[0]).getElementType();
  constexpr int64_t kMaxElements = int64_t(1) << 24;
  if (isa<IntegerType>(elt)) {
    // Integers exactly: start, start + delta, ... each below limit.
    int64_t v[3];
    const char *names[3] = {"start", "limit", "delta"};
    for (unsigned i = 0; i < 3; ++i) {
      auto one = nc.constantInt(i, names[i]);
      if (!one)
        return one.takeError();
      v[i] = *one;
    }
    if (v[2] == 0)
      return nc.error("delta is 0");
    uint64_t n = integerRangeCount(v[0], v[1], v[2]);
    if (n >= static_cast<uint64_t>(kMaxElements))
      return nc.error("range has too many elements");
    auto it = cast<IntegerType>(elt);
    SmallVector<APInt> vals;
    int64_t x = v[0];
    for (uint64_t i = 0; i < n; ++i) {
      vals.emplace_back(it.getWidth(), x, true);
      if (i + 1 < n) // in [start, limit): never overflows
        x = static_cast<int64_t>(static_cast<uint64_t>(x) +
                                 static_cast<uint64_t>(v[2]));
    }
    auto type = RankedTensorType::get({static_cast<int64_t>(n)}, elt);
    nc.setOutput(0, smp::ConstantOp::create(
                        nc.builder(), nc.loc(),
                        cast<TypedAttr>(DenseElementsAttr::get(type, vals))));
    return llvm::Error::success();
  }
  auto start = nc.constantScalar(0, "start");
  if (!start)
    return start.takeError();
  auto limit = nc.constantScalar(1, "limit");
  if (!limit)
    return limit.takeError();
  auto delta = nc.constantScalar(2, "delta");
  if (!delta)
    return delta.takeError();
  if (*delta == 0)
    return nc.error("delta is 0");
  double count = std::ceil((*limit - *start) / *delta);
  if (!(count < double(kMaxElements)))
    return nc.error("range has too many elements");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  auto ft = dyn_cast<FloatType>(elt);
  if (!ft)
    return nc.error("Range of a non-numeric type");
  SmallVector<APFloat> vals;
  for (int64_t i = 0; i < n; ++i) {
    // Accumulate in the element type, as onnxruntime and PyTorch do.
    APFloat v(*start + i * *delta);
    bool loses;
    v.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &loses);
    vals.push_back(v);
  }
  auto type = RankedTensorType::get({n}, elt);
  nc.setOutput(0, smp::ConstantOp::create(
                      nc.builder(), nc.loc(),
                      cast<TypedAttr>(DenseElementsAttr::get(type, vals))));
  return llvm::Error::success();
}

llvm::Error convertConstant(NodeContext &nc) {
  auto &b = nc.builder();
  Attribute attr;
  if (const auto *a = nc.attr("value")) {
    auto t = readTensor(nc.context(), a->t(), nc.modelDir());
    if (!t)
      return nc.error(llvm::toString(t.takeError()));
    attr = *t;
  } else if (const auto *a = nc.attr("value_float")) {
    attr = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()),
                                  a->f());
  } else if (const auto *a = nc.attr("value_floats")) {
    SmallVector<float> v(a->floats().begin(), a->floats().end());
    attr = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(v.size())},
                              b.getF32Type()),
        ArrayRef<float>(v));
  } else if (const auto *a = nc.attr("value_int")) {
    attr = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                  static_cast<int64_t>(a->i()));
  } else if (const auto *a = nc.attr("value_ints")) {
    SmallVector<int64_t> v(a->ints().begin(), a->ints().end());
    attr = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(v.size())},
                              b.getI64Type()),
        ArrayRef<int64_t>(v));
  } else {
    return nc.error("only tensor, float(s) and int(s) constants are "
                    "supported (no strings or sparse tensors)");
  }
  nc.setOutput(0, smp::ConstantOp::create(b, nc.loc(), cast<TypedAttr>(attr)));
  return llvm::Error::success();
}

/// Inference: Dropout is the identity and its mask is all true. Training
/// mode (training_mode=1 from opset 12 on; under --train any Dropout of an
/// older opset, which cannot say, as torch.onnx.export writes one only in
/// training mode) is smp.dropout in a training compile, its mask output
/// the same draw on ones; --no-dropout makes it the identity instead. A
/// forward-only compile of a training-mode Dropout is refused: it would
/// draw a mask no step numbers.
llvm::Error convertDropout(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  double ratio = 0.5;
  bool training = false;
  if (nc.opset() >= 12) {
    if (nc.hasInput(2)) {
      auto t = nc.constantScalar(2, "training_mode");
      if (!t)
        return t.takeError();
      training = *t != 0;
    }
    // No training_mode (inference, by ONNX's default) but a ratio, in a
    // training compile: torch.onnx.export's TorchScript translation of
    // scaled_dot_product_attention(dropout_p > 0) writes this in a training
    // export (Hugging Face's default sdpa attention); the model trained in
    // PyTorch drops there, so smp does too, and says so.
    bool untagged = !nc.hasInput(2) && nc.hasInput(1) && nc.training();
    if ((training || untagged) && nc.hasInput(1)) {
      auto r = nc.constantScalar(1, "ratio");
      if (!r)
        return r.takeError();
      ratio = *r;
    }
    if (untagged && ratio != 0 && !nc.noDropout()) {
      training = true;
      nc.warnOnce("untagged dropout",
                  "Dropout with a ratio but no training_mode (inference by "
                  "ONNX's default), as torch.onnx.export writes "
                  "scaled_dot_product_attention's dropout_p in a training "
                  "export: trained as dropout, as PyTorch trains it; pass "
                  "--no-dropout to apply none");
    } else if (untagged) {
      training = ratio != 0;
    }
  } else {
    ratio = nc.attrFloat("ratio", 0.5f);
    training = nc.training();
  }
  if (training && !(ratio >= 0 && ratio <= 1)) {
    char shown[32];
    std::snprintf(shown, sizeof shown, "%g", ratio);
    return nc.error("ratio " + std::string(shown) +
                    " is not a probability (ONNX Dropout's ratio is in "
                    "[0, 1])");
  }
  bool random = training && ratio != 0 && !nc.noDropout();
  if (random && !nc.training())
    return nc.error(
        "training_mode=1 in a forward-only compile: a random mask with no "
        "training step to draw it for; compile with --train to train with "
        "dropout, or pass --no-dropout to run it as the identity (as "
        "model.eval() does)");
  if (training && ratio != 0 && nc.noDropout())
    nc.noteDroppedDropout();
  if (!random) {
    nc.setOutput(0, *x);
    if (nc.hasOutput(1))
      nc.setOutput(1, nc.splat(nc.builder().getI1Type(), shapeOf(*x), 1));
    return llvm::Error::success();
  }
  auto type = dyn_cast<RankedTensorType>(x->getType());
  if (!type || !isa<FloatType>(type.getElementType()))
    return nc.error("training-mode Dropout of a " +
                    std::string(type ? "non-float" : "unranked") +
                    " tensor: smp draws masks for float tensors");
  if (nc.hasAttr("seed"))
    nc.warnOnce("dropout seed",
                "Dropout's `seed` attribute is not used: smp draws every "
                "mask from smpc --seed (default 0), the step and the "
                "element's place in the global batch");
  OpBuilder &b = nc.builder();
  int64_t stream = nc.nextDropoutStream();
  auto drop = [&](Value v) {
    return smp::DropoutOp::create(b, nc.loc(), v,
                                  llvm::APFloat(static_cast<float>(ratio)),
                                  static_cast<uint64_t>(stream))
        .getResult();
  };
  nc.setOutput(0, drop(*x));
  if (nc.hasOutput(1)) {
    // The mask: the same draw (same stream) on ones, nonzero where kept.
    Value kept = drop(nc.splat(type.getElementType(), type.getShape(), 1.0));
    Value zero = nc.splat(type.getElementType(), {}, 0.0);
    auto dropped = nc.create<smp::EqualOp>(nc.placeholder(), kept, zero);
    if (!dropped)
      return dropped.takeError();
    auto mask = nc.create<smp::NotOp>(*dropped);
    if (!mask)
      return mask.takeError();
    nc.setOutput(1, *mask);
  }
  return llvm::Error::success();
}

llvm::Error convertTrilu(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  int64_t k = 0;
  if (nc.hasInput(1)) {
    auto kv = nc.constantInt(1, "k");
    if (!kv)
      return kv.takeError();
    k = *kv;
  }
  return nc.output(nc.create<smp::TriluOp>(
      *x, nc.builder().getBoolAttr(nc.attrInt("upper", 1) != 0),
      nc.builder().getI64IntegerAttr(k)));
}

/// Tile(x, repeats) with constant repeats: smp.tile (constant inputs fold).
llvm::Error convertTile(NodeContext &nc) {
  auto args = inputAndInts(nc, "repeats");
  if (!args)
    return args.takeError();
  auto &[x, repeats] = *args;
  auto in = shapeOf(x);
  if (repeats.size() != in.size())
    return nc.error("repeats has " + llvm::Twine(repeats.size()) +
                    " entries for an input of rank " + llvm::Twine(in.size()));
  SmallVector<int64_t> out;
  for (auto [d, r] : llvm::zip(in, repeats)) {
    if (r < 0)
      return nc.error("negative repeat " + llvm::Twine(r));
    std::optional<int64_t> size = llvm::checkedMul(d, r);
    out.push_back(size ? *size : -1);
  }
  if (llvm::is_contained(out, -1) || !checkedNumElements(out))
    return nc.error("tiling " + shapeToString(in) + " by " +
                    shapeToString(repeats) + " is too large");
  if (ArrayRef<int64_t>(out) == ArrayRef<int64_t>(in)) {
    nc.setOutput(0, x);
    return llvm::Error::success();
  }
  return nc.output(nc.create<smp::TileOp>(
      nc.placeholder(), x, nc.builder().getDenseI64ArrayAttr(repeats)));
}

} // namespace

void registerShapeConverters(ConverterTable &t) {
  t["Reshape"] = convertReshape;
  t["Flatten"] = convertFlatten;
  t["Squeeze"] = convertSqueeze;
  t["Unsqueeze"] = convertUnsqueeze;
  t["Transpose"] = convertTranspose;
  t["Concat"] = convertConcat;
  t["Split"] = convertSplit;
  t["Slice"] = convertSlice;
  t["Gather"] = convertGather;
  t["Expand"] = convertExpand;
  t["Shape"] = convertShape;
  t["Size"] = convertSize;
  t["ConstantOfShape"] = convertConstantOfShape;
  t["Range"] = convertRange;
  t["Constant"] = convertConstant;
  t["Dropout"] = convertDropout;
  t["Trilu"] = convertTrilu;
  t["Tile"] = convertTile;
}

} // namespace smp::onnx_frontend
