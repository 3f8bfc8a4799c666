//===- ConvertGatherIndexed.cpp - ONNX GatherND, GatherElements -> smp ----===//
//
// Gathers at computed positions: GatherND (index tuples, with batch_dims;
// what the dynamo exporter writes for `aten.index` with tensor indices, e.g.
// HF attention masks) and GatherElements (torch.gather; RoBERTa's position
// ids). Each is one smp op with a scatter-add gradient. Constant indices are
// checked against the data's dims here; others by the kernels at run time.
//
//===----------------------------------------------------------------------===//

#include "Chain.h"
#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// ONNX allows int64 indices only (int32 too, as Gather does, is accepted).
llvm::Error checkIndexType(NodeContext &nc, Value indices) {
  Type elt = tensorType(indices).getElementType();
  if (isa<IntegerType>(elt) && !elt.isInteger(1))
    return llvm::Error::success();
  std::string got;
  llvm::raw_string_ostream(got) << elt;
  return nc.error("input '" + nc.node().input(1) +
                  "' (indices) must be an int32 or int64 tensor, got " + got);
}

/// A constant index outside [-dim, dim) is an error naming it.
llvm::Error checkConstantIndices(NodeContext &nc,
                                 function_ref<int64_t(int64_t)> dimOf,
                                 function_ref<int64_t(int64_t)> axisOf) {
  DenseElementsAttr idx = nc.constantInput(1);
  if (!idx)
    return llvm::Error::success();
  int64_t k = 0;
  for (const APInt &v : idx.getValues<APInt>()) {
    int64_t i = v.getSExtValue(), dim = dimOf(k);
    if (i < -dim || i >= dim)
      return nc.error("index " + llvm::Twine(i) + " at position " +
                      llvm::Twine(k) + " is out of range for dim " +
                      llvm::Twine(axisOf(k)) + " of size " + llvm::Twine(dim));
    ++k;
  }
  return llvm::Error::success();
}

/// The node's (data, indices), the indices of an integer type.
llvm::Expected<std::pair<Value, Value>> dataAndIndices(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  if (auto err = checkIndexType(nc, (*in)[1]))
    return std::move(err);
  return std::make_pair((*in)[0], (*in)[1]);
}

llvm::Error convertGatherND(NodeContext &nc) {
  auto in = dataAndIndices(nc);
  if (!in)
    return in.takeError();
  auto [data, indices] = *in;
  int64_t b = nc.attrInt("batch_dims", 0);
  auto dataShape = shapeOf(data), idxShape = shapeOf(indices);
  // The shape checks (with their messages) are the op's type inference;
  // the constant check below needs a valid last dim first.
  auto op = nc.create<smp::GatherNdOp>(nc.placeholder(), data, indices,
                                       nc.builder().getI64IntegerAttr(b));
  if (!op)
    return op.takeError();
  int64_t k = idxShape.back();
  if (auto err = checkConstantIndices(
          nc, [&](int64_t i) { return dataShape[b + i % k]; },
          [&](int64_t i) { return b + i % k; }))
    return err;
  return nc.output(std::move(op));
}

llvm::Error convertGatherElements(NodeContext &nc) {
  auto in = dataAndIndices(nc);
  if (!in)
    return in.takeError();
  auto [data, indices] = *in;
  auto axis = nc.attrAxis(0, tensorType(data).getRank());
  if (!axis)
    return axis.takeError();
  int64_t dim = tensorType(data).getDimSize(*axis);
  if (auto err = checkConstantIndices(
          nc, [&](int64_t) { return dim; }, [&](int64_t) { return *axis; }))
    return err;
  return nc.output(nc.create<smp::GatherElementsOp>(
      nc.placeholder(), data, indices, nc.builder().getI64IntegerAttr(*axis)));
}

/// ScatterElements(data, indices, updates, axis, reduction): `updates`
/// scatter-added at `indices` into zeros (smp.gather_elements_grad, whose
/// gradient gathers it back), then added to data (reduction add) or placed
/// over it where an index lands (none: duplicate indices are undefined in
/// ONNX; here they add up). torch's scatter_add and scatter export so.
llvm::Error convertScatterElements(NodeContext &nc) {
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  auto [data, indices, updates] = std::tuple((*in)[0], (*in)[1], (*in)[2]);
  auto type = tensorType(data);
  if (!isa<FloatType>(type.getElementType()))
    return nc.error("only float data is supported");
  if (shapeOf(indices) != shapeOf(updates))
    return nc.error("indices and updates must have one shape");
  auto axis = nc.attrAxis(0, type.getRank());
  if (!axis)
    return axis.takeError();
  std::string reduction = nc.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return nc.error("reduction '" + reduction +
                    "' is not supported (none and add are)");
  int64_t dim = type.getDimSize(*axis);
  if (auto err = checkConstantIndices(
          nc, [&](int64_t) { return dim; }, [&](int64_t) { return *axis; }))
    return err;
  auto axisAttr = nc.builder().getI64IntegerAttr(*axis);
  Chain c(nc);
  auto scatter = [&](Value v) {
    return c.keep(
        nc.create<smp::GatherElementsGradOp>(type, indices, v, axisAttr));
  };
  Value scattered = scatter(updates);
  if (reduction == "add")
    return c.finish(c.binary<smp::AddOp>(data, scattered));
  // Where an index lands (a scatter of ones is positive), the updates.
  Value ones = nc.filled(type.getElementType(), shapeOf(updates), 1.0);
  Value hit = c.binary<smp::GreaterOp>(scatter(ones), c.scalar(data, 0.0));
  return c.finish(c.where(hit, scattered, data));
}

/// ScatterND(data, indices, updates, reduction) with constant indices
/// (torch.onnx.export's in-place assignments `y[:, 0] = v` compute them from
/// shapes, constants here): data viewed as [L, R] rows (L the addressed
/// dims' product), each index turned into a row at import, the updates
/// scatter-added into those rows (gather_elements_grad over the rows
/// expanded), then added to data (add) or placed over the rows they hit
/// (none).
llvm::Error convertScatterND(NodeContext &nc) {
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  Value data = (*in)[0], updates = (*in)[2];
  auto type = tensorType(data);
  if (!isa<FloatType>(type.getElementType()))
    return nc.error("only float data is supported");
  std::string reduction = nc.attrString("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return nc.error("reduction '" + reduction +
                    "' is not supported (none and add are)");
  DenseElementsAttr idx = nc.constantInput(1);
  SmallVector<int64_t> ishape = shapeOf((*in)[1]), dshape = shapeOf(data);
  if (!idx || ishape.empty())
    return nc.error("indices must be a constant (computed from shapes)");
  int64_t k = ishape.back(), rank = dshape.size();
  if (k < 1 || k > rank)
    return nc.error("indices address " + llvm::Twine(k) + " dims of a rank-" +
                    llvm::Twine(rank) + " tensor");
  int64_t l = 1, r = 1, m = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < k ? l : r) *= dshape[d];
  for (int64_t n : ArrayRef<int64_t>(ishape).drop_back())
    m *= n;
  SmallVector<int64_t> want(ishape.begin(), ishape.end() - 1);
  want.append(dshape.begin() + k, dshape.end());
  if (shapeOf(updates) != want)
    return nc.error("updates must be " + shapeToString(want) + ", got " +
                    shapeToString(shapeOf(updates)));
  SmallVector<double> rows, hit(l, 0.0);
  SmallVector<int64_t> flat;
  for (const APInt &v : idx.getValues<APInt>())
    flat.push_back(v.getSExtValue());
  for (int64_t i = 0; i < m; ++i) {
    int64_t row = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = flat[i * k + j], n = dshape[j];
      if (v < -n || v >= n)
        return nc.error("index " + llvm::Twine(v) + " out of range for dim " +
                        llvm::Twine(j) + " of size " + llvm::Twine(n));
      row = row * n + (v < 0 ? v + n : v);
    }
    rows.push_back(row);
    hit[row] = 1.0;
  }
  auto &b = nc.builder();
  Chain c(nc);
  Value table = c.reshape(data, {l, r});
  Value upd = c.reshape(updates, {m, r});
  Value column = nc.constantOf(b.getI64Type(), {m, 1}, rows);
  Value at = c.keep(nc.create<smp::ExpandOp>(
      RankedTensorType::get({m, r}, b.getI64Type()), column));
  Value scattered = c.keep(nc.create<smp::GatherElementsGradOp>(
      RankedTensorType::get({l, r}, type.getElementType()), at, upd,
      b.getI64IntegerAttr(0)));
  Value y;
  if (reduction == "add") {
    y = c.binary<smp::AddOp>(table, scattered);
  } else {
    Value mask = nc.constantOf(b.getI1Type(), {l, 1}, hit);
    y = c.where(mask, scattered, table);
  }
  return c.finish(c.reshape(y, dshape));
}

} // namespace

void registerGatherIndexedConverters(ConverterTable &t) {
  t["ScatterElements"] = convertScatterElements;
  t["ScatterND"] = convertScatterND;
  t["Scatter"] = convertScatterElements; // opset 9-10: the same, deprecated
  t["GatherND"] = convertGatherND;
  t["GatherElements"] = convertGatherElements;
}

} // namespace smp::onnx_frontend
