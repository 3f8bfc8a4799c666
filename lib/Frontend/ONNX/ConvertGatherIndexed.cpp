//===- ConvertGatherIndexed.cpp - ONNX GatherND, GatherElements -> smp ----===//
//
// Gathers at computed positions: GatherND (index tuples, with batch_dims;
// what the dynamo exporter writes for `aten.index` with tensor indices, e.g.
// HF attention masks) and GatherElements (torch.gather; RoBERTa's position
// ids). Each is one smp op with a scatter-add gradient. Constant indices are
// checked against the data's dims here; others by the kernels at run time.
// OneHot (a comparison with the positions and a where) is here too.
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

/// The box [lo, hi) of each of the k addressed dims whose positions the m
/// index tuples of `flat` (in range) enumerate in row-major order: torch's
/// slice assignment `y[:, 1:] = x`, if they do.
std::optional<SmallVector<std::pair<int64_t, int64_t>>>
indexedBox(ArrayRef<int64_t> flat, int64_t m, int64_t k,
           ArrayRef<int64_t> dshape) {
  auto at = [&](int64_t i, int64_t j) {
    int64_t v = flat[i * k + j];
    return v < 0 ? v + dshape[j] : v;
  };
  if (m == 0)
    return std::nullopt;
  SmallVector<std::pair<int64_t, int64_t>> box;
  int64_t count = 1;
  for (int64_t j = 0; j < k; ++j) {
    box.push_back({at(0, j), at(m - 1, j) + 1});
    if (box.back().second <= box.back().first)
      return std::nullopt;
    count *= box.back().second - box.back().first;
  }
  if (count != m)
    return std::nullopt;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = k - 1, rest = i; j >= 0; --j) {
      int64_t extent = box[j].second - box[j].first;
      if (at(i, j) != box[j].first + rest % extent)
        return std::nullopt;
      rest /= extent;
    }
  return box;
}

/// `data` with its box `box[j:]` (over the dims from j) replaced by (or,
/// with `add`, added to) `upd`, of the box's shape: concats of its slices
/// around the box, dim by dim (each sample's rows stay its own).
Value replaceBox(Chain &c, OpBuilder &b, Value data, Value upd,
                 ArrayRef<std::pair<int64_t, int64_t>> box, size_t j,
                 bool add) {
  if (j == box.size())
    return add ? c.binary<smp::AddOp>(data, upd) : upd;
  if (c.failed())
    return {};
  auto [lo, hi] = box[j];
  int64_t n = shapeOf(data)[j];
  Value mid = lo == 0 && hi == n ? data : c.slice(data, j, lo, hi);
  SmallVector<Value> parts;
  if (lo > 0)
    parts.push_back(c.slice(data, j, 0, lo));
  parts.push_back(replaceBox(c, b, mid, upd, box, j + 1, add));
  if (hi < n)
    parts.push_back(c.slice(data, j, hi, n));
  if (parts.size() == 1 || c.failed())
    return parts.size() == 1 ? parts[0] : Value();
  return c.make<smp::ConcatOp>(ValueRange(parts), b.getI64IntegerAttr(j));
}

/// The slab of ScatterElements' constant indices `idx` (of the updates'
/// shape) along `axis` when they address [lo, lo + e) at every position,
/// the other dims whole (torch's select_scatter and slice_scatter): the box
/// over every dim, else none.
std::optional<SmallVector<std::pair<int64_t, int64_t>>>
elementsBox(DenseElementsAttr idx, ArrayRef<int64_t> ishape,
            ArrayRef<int64_t> dshape, int64_t axis) {
  if (!idx || ishape.size() != dshape.size())
    return std::nullopt;
  SmallVector<std::pair<int64_t, int64_t>> box;
  for (size_t d = 0; d < dshape.size(); ++d)
    if (static_cast<int64_t>(d) != axis && ishape[d] != dshape[d])
      return std::nullopt;
  int64_t n = dshape[axis], e = ishape[axis], inner = 1, k = 0, lo = 0;
  for (size_t d = axis + 1; d < dshape.size(); ++d)
    inner *= ishape[d];
  for (const APInt &v : idx.getValues<APInt>()) {
    int64_t i = v.getSExtValue(), at = (k++ / inner) % e;
    i = i < 0 ? i + n : i;
    if (k == 1)
      lo = i;
    if (i != lo + at)
      return std::nullopt;
  }
  for (size_t d = 0; d < dshape.size(); ++d)
    box.push_back(static_cast<int64_t>(d) == axis
                      ? std::make_pair(lo, lo + e)
                      : std::make_pair(int64_t(0), dshape[d]));
  return box;
}

/// ScatterElements(data, indices, updates, axis, reduction): `updates`
/// scatter-added at `indices` into zeros (smp.gather_elements_grad, whose
/// gradient gathers it back), then added to data (reduction add) or placed
/// over it where an index lands (none: duplicate indices are undefined in
/// ONNX; here they add up). torch's scatter_add and scatter export so.
/// Constant indices that address one slab along the axis (the dynamo
/// export's select_scatter and slice_scatter: BART's labels shifted right
/// into its decoder's input, on int64) become slices and a concat around
/// it, on float or integer data; other integer data is refused.
llvm::Error convertScatterElements(NodeContext &nc) {
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  auto [data, indices, updates] = std::tuple((*in)[0], (*in)[1], (*in)[2]);
  auto type = tensorType(data);
  bool integer = isa<IntegerType>(type.getElementType());
  if (!isa<FloatType>(type.getElementType()) && !integer)
    return nc.error("only float and integer data are supported");
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
  if (auto box = elementsBox(nc.constantInput(1), shapeOf(indices),
                             shapeOf(data), *axis))
    return c.finish(replaceBox(c, nc.builder(), data, updates, *box, 0,
                               reduction == "add"));
  if (integer)
    return nc.error("integer data is supported only where constant indices "
                    "address one slab along the axis, as torch's "
                    "select_scatter and slice_scatter do");
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
/// (none). Indices that enumerate a box (torch's slice assignment, such as
/// T5's labels shifted right into its decoder's input, `y[..., 1:] =
/// x[..., :-1]`) become slices and concats around it instead, which keep
/// each sample's rows its own (data parallelism splits them). Other
/// integer data has no scatter-add: its rows gather the update that lands
/// on them.
llvm::Error convertScatterND(NodeContext &nc) {
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  Value data = (*in)[0], updates = (*in)[2];
  auto type = tensorType(data);
  bool integer = isa<IntegerType>(type.getElementType());
  if (!isa<FloatType>(type.getElementType()) && !integer)
    return nc.error("only float and integer data are supported");
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
  SmallVector<double> rows, hit(l, 0.0), source(l, 0.0);
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
    if (integer && reduction == "add" && hit[row] != 0.0)
      return nc.error("integer data with reduction 'add' and a row " +
                      llvm::Twine(row) + " addressed twice is not supported");
    rows.push_back(row);
    hit[row] = 1.0;
    source[row] = static_cast<double>(i); // the last update wins
  }
  auto &b = nc.builder();
  Chain c(nc);
  if (auto box = indexedBox(flat, m, k, dshape)) {
    SmallVector<int64_t> boxShape;
    for (auto [lo, hi] : *box)
      boxShape.push_back(hi - lo);
    boxShape.append(dshape.begin() + k, dshape.end());
    return c.finish(replaceBox(c, b, data, c.reshape(updates, boxShape), *box,
                               0, reduction == "add"));
  }
  Value table = c.reshape(data, {l, r});
  Value upd = c.reshape(updates, {m, r});
  Value mask = nc.constantOf(b.getI1Type(), {l, 1}, hit);
  if (integer) {
    Value from = nc.constantOf(b.getI64Type(), {l}, source);
    Value landed =
        c.make<smp::GatherOp>(upd, from, b.getI64IntegerAttr(0), IntegerAttr());
    Value y = reduction == "add"
                  ? c.binary<smp::AddOp>(
                        table, c.where(mask, landed, c.scalar(table, 0)))
                  : c.where(mask, landed, table);
    return c.finish(c.reshape(y, dshape));
  }
  Value column = nc.constantOf(b.getI64Type(), {m, 1}, rows);
  Value at = c.keep(nc.create<smp::ExpandOp>(
      RankedTensorType::get({m, r}, b.getI64Type()), column));
  Value scattered = c.keep(nc.create<smp::GatherElementsGradOp>(
      RankedTensorType::get({l, r}, type.getElementType()), at, upd,
      b.getI64IntegerAttr(0)));
  Value y;
  if (reduction == "add")
    y = c.binary<smp::AddOp>(table, scattered);
  else
    y = c.where(mask, scattered, table);
  return c.finish(c.reshape(y, dshape));
}

/// OneHot(indices, depth, values = [off, on], axis = -1): a new dim of
/// `depth` entries (a constant) at `axis` holding `on` where its position
/// is the index and `off` elsewhere; a negative index counts from the end
/// and one outside [-depth, depth) matches none (all `off`); float indices
/// are truncated toward zero (onnxruntime casts them to int64). PyTorch's
/// `F.one_hot` (a mixture of experts' routing in the TorchScript export).
/// A comparison with the positions, then a where of the two values.
llvm::Error convertOneHot(NodeContext &nc) {
  auto in = nc.inputs(3);
  if (!in)
    return in.takeError();
  Value indices = (*in)[0], values = (*in)[2];
  auto depthValue = nc.constantScalar(1, "depth");
  if (!depthValue)
    return depthValue.takeError();
  auto depth = static_cast<int64_t>(*depthValue);
  if (depth < 1 || depth > (int64_t(1) << 24))
    return nc.error("depth " + llvm::Twine(depth) +
                    " is not in [1, 2^24]: smp needs a constant number of "
                    "classes");
  if (int64_t n = tensorType(values).getNumElements(); n != 2)
    return nc.error("values must hold two elements (off, on), not " +
                    llvm::Twine(n));
  SmallVector<int64_t> shape = shapeOf(indices);
  int64_t rank = static_cast<int64_t>(shape.size()) + 1;
  auto axis = nc.attrAxis(-1, rank);
  if (!axis)
    return axis.takeError();
  Type i64 = nc.builder().getI64Type();
  Chain c(nc);
  Value idx = c.keep(nc.castTo(indices, i64));
  Value negative = c.binary<smp::LessOp>(idx, c.scalar(idx, 0));
  idx = c.where(negative, c.binary<smp::AddOp>(idx, c.scalar(idx, depth)), idx);
  SmallVector<int64_t> unsqueezed(shape);
  unsqueezed.insert(unsqueezed.begin() + *axis, 1);
  SmallVector<int64_t> positionsShape(rank, 1);
  positionsShape[*axis] = depth;
  SmallVector<double> positions(depth);
  for (int64_t k = 0; k < depth; ++k)
    positions[k] = static_cast<double>(k);
  Value hot =
      c.binary<smp::EqualOp>(c.reshape(idx, unsqueezed),
                             nc.constantOf(i64, positionsShape, positions));
  Value pair = c.reshape(values, {2});
  Value off = c.reshape(c.slice(pair, 0, 0, 1), {});
  Value on = c.reshape(c.slice(pair, 0, 1, 2), {});
  return c.finish(c.where(hot, on, off));
}

} // namespace

void registerGatherIndexedConverters(ConverterTable &t) {
  t["OneHot"] = convertOneHot;
  t["ScatterElements"] = convertScatterElements;
  t["ScatterND"] = convertScatterND;
  t["Scatter"] = convertScatterElements; // opset 9-10: the same, deprecated
  t["GatherND"] = convertGatherND;
  t["GatherElements"] = convertGatherElements;
}

} // namespace smp::onnx_frontend
