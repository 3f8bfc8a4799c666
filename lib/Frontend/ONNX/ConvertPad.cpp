//===- ConvertPad.cpp - ONNX Pad as slices and concatenations -------------===//
//
// Pad(x, pads[, constant_value[, axes]]) (attributes `pads`, `value` before
// opset 11), modes constant, edge, reflect and wrap, negative pads cropping:
// per padded axis, a crop (slice), then the concatenation of what goes
// before, x and what goes after — a splat (constant), the edge row expanded
// (edge), the rows next to the edge reversed (reflect: a slice with step
// -1) or the far end (wrap). Slices, concatenations and expands already run
// on every backend and have gradients, so Pad has no op of its own. (torch
// 1.13 exports F.avg_pool2d and padded convolutions through Pad.)
//
//===----------------------------------------------------------------------===//

#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// x[start:limit:step] along `axis`.
llvm::Expected<Value> sliceAxis(NodeContext &nc, Value x, int64_t axis,
                                int64_t start, int64_t limit, int64_t step) {
  SmallVector<int64_t> shape = shapeOf(x);
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      steps(shape.size(), 1);
  starts[axis] = start;
  limits[axis] = limit;
  steps[axis] = step;
  auto &b = nc.builder();
  return nc.create<smp::SliceOp>(
      nc.placeholder(), x, b.getDenseI64ArrayAttr(starts),
      b.getDenseI64ArrayAttr(limits), b.getDenseI64ArrayAttr(steps));
}

/// The `n` rows that go before (`before`) or after x along `axis`.
llvm::Expected<Value> padding(NodeContext &nc, Value x, int64_t axis, int64_t n,
                              bool before, llvm::StringRef mode, double value) {
  SmallVector<int64_t> shape = shapeOf(x);
  int64_t dim = shape[axis];
  if (mode == "constant") {
    shape[axis] = n;
    return nc.splat(tensorType(x).getElementType(), shape, value);
  }
  if (mode == "edge") {
    auto edge = before ? sliceAxis(nc, x, axis, 0, 1, 1)
                       : sliceAxis(nc, x, axis, dim - 1, dim, 1);
    if (!edge)
      return edge.takeError();
    shape[axis] = n;
    return nc.create<smp::ExpandOp>(tensorType(x).clone(shape), *edge);
  }
  if (mode == "reflect")
    return before ? sliceAxis(nc, x, axis, n, 0, -1)
                  : sliceAxis(nc, x, axis, dim - 2, dim - 2 - n, -1);
  return before ? sliceAxis(nc, x, axis, dim - n, dim, 1) // wrap
                : sliceAxis(nc, x, axis, 0, n, 1);
}

llvm::Expected<SmallVector<int64_t>> padsOf(NodeContext &nc, int64_t rank) {
  SmallVector<int64_t> pads;
  if (nc.opset() < 11) {
    pads = nc.attrInts("pads");
  } else {
    auto p = nc.constantInts(1, "pads");
    if (!p)
      return p.takeError();
    pads = *p;
  }
  SmallVector<int64_t> axes;
  if (nc.opset() >= 18 && nc.hasInput(3)) {
    auto a = nc.constantInts(3, "axes");
    if (!a)
      return a.takeError();
    axes = *a;
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  int64_t k = axes.size();
  if (static_cast<int64_t>(pads.size()) != 2 * k)
    return nc.error("pads has " + llvm::Twine(pads.size()) +
                    " values, expected " + llvm::Twine(2 * k) +
                    " (a begin and an end per axis)");
  SmallVector<int64_t> full(2 * rank, 0);
  SmallVector<bool> seen(rank, false);
  for (int64_t i = 0; i < k; ++i) {
    auto a = normalizeAxis(axes[i], rank);
    if (!a || seen[*a])
      return nc.error("invalid or repeated axis " + llvm::Twine(axes[i]));
    seen[*a] = true;
    full[*a] = pads[i];
    full[rank + *a] = pads[k + i];
  }
  return full;
}

llvm::Error convertPad(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
  int64_t rank = shapeOf(*x).size();
  std::string mode = nc.attrString("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "reflect" &&
      mode != "wrap")
    return nc.error("unknown mode '" + mode + "'");
  auto pads = padsOf(nc, rank);
  if (!pads)
    return pads.takeError();
  double value = nc.attrFloat("value", 0.0f);
  if (nc.opset() >= 11 && nc.hasInput(2)) {
    auto v = nc.constantScalar(2, "constant_value");
    if (!v)
      return v.takeError();
    value = *v;
  }
  Value y = *x;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t before = (*pads)[d], after = (*pads)[rank + d];
    if (before == 0 && after == 0)
      continue;
    int64_t dim = shapeOf(y)[d];
    if (ShapedType::isDynamic(dim))
      return nc.error("pads dim " + llvm::Twine(d) +
                      ", whose size is not known (bind it: smpc --dim)");
    if (before < 0 || after < 0) { // crop first
      int64_t lo = std::max<int64_t>(-before, 0);
      int64_t hi = dim - std::max<int64_t>(-after, 0);
      if (lo > hi)
        return nc.error("negative pads remove more than dim " + llvm::Twine(d) +
                        " holds");
      auto cropped = sliceAxis(nc, y, d, lo, hi, 1);
      if (!cropped)
        return cropped.takeError();
      y = *cropped;
      dim = hi - lo;
      before = std::max<int64_t>(before, 0);
      after = std::max<int64_t>(after, 0);
    }
    if (mode == "reflect" && (before >= dim || after >= dim))
      return nc.error("reflect pads of " +
                      llvm::Twine(std::max(before, after)) + " on dim " +
                      llvm::Twine(d) + " of size " + llvm::Twine(dim) +
                      " (at most size - 1)");
    if ((mode == "edge" && dim == 0) ||
        (mode == "wrap" && (before > dim || after > dim)))
      return nc.error(mode + " pads on dim " + llvm::Twine(d) + " of size " +
                      llvm::Twine(dim));
    SmallVector<Value> parts;
    if (before > 0) {
      auto p = padding(nc, y, d, before, /*before=*/true, mode, value);
      if (!p)
        return p.takeError();
      parts.push_back(*p);
    }
    parts.push_back(y);
    if (after > 0) {
      auto p = padding(nc, y, d, after, /*before=*/false, mode, value);
      if (!p)
        return p.takeError();
      parts.push_back(*p);
    }
    if (parts.size() == 1)
      continue; // only cropped
    auto cat = nc.create<smp::ConcatOp>(nc.placeholder(), parts,
                                        nc.builder().getI64IntegerAttr(d));
    if (!cat)
      return cat.takeError();
    y = *cat;
  }
  nc.setOutput(0, y);
  return llvm::Error::success();
}

} // namespace

void registerPadConverters(ConverterTable &t) { t["Pad"] = convertPad; }

} // namespace smp::onnx_frontend
