//===- ConvertReduce.cpp - ONNX reductions, softmax and CumSum -> smp -----===//

#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

/// `axesInputOpset`: the opset from which axes is an input, not an attribute.
template <typename OpT, int axesInputOpset>
llvm::Error convertReduce(NodeContext &nc) {
  auto x = nc.input(0);
  if (!x)
    return x.takeError();
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
  int64_t rank = tensorType(*x).getRank();
  if (axes.empty()) {
    if (nc.attrInt("noop_with_empty_axes", 0) != 0) {
      nc.setOutput(0, *x);
      return llvm::Error::success();
    }
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  return nc.output(nc.create<OpT>(nc.placeholder(), *x,
                                  nc.builder().getDenseI64ArrayAttr(axes),
                                  nc.attrInt("keepdims", 1) != 0));
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
  auto axisValues = nc.constantInts(1, "axis");
  if (!axisValues)
    return axisValues.takeError();
  if (axisValues->size() != 1)
    return nc.error("axis must hold one value, got " +
                    llvm::Twine(axisValues->size()));
  int64_t rank = tensorType(x).getRank();
  auto axis = normalizeAxis(axisValues->front(), rank);
  if (!axis)
    return nc.error("axis " + llvm::Twine(axisValues->front()) +
                    " out of range for rank " + llvm::Twine(rank));
  auto &b = nc.builder();
  return nc.output(nc.create<smp::CumSumOp>(
      x, b.getI64IntegerAttr(*axis),
      b.getBoolAttr(nc.attrInt("exclusive", 0) != 0),
      b.getBoolAttr(nc.attrInt("reverse", 0) != 0)));
}

} // namespace

void registerReduceConverters(ConverterTable &t) {
  t["ReduceSum"] = convertReduce<smp::ReduceSumOp, 13>;
  t["ReduceMean"] = convertReduce<smp::ReduceMeanOp, 18>;
  t["ReduceMax"] = convertReduce<smp::ReduceMaxOp, 18>;
  t["Softmax"] = convertSoftmax<smp::SoftmaxOp>;
  t["LogSoftmax"] = convertSoftmax<smp::LogSoftmaxOp>;
  t["CumSum"] = convertCumSum;
}

} // namespace smp::onnx_frontend
