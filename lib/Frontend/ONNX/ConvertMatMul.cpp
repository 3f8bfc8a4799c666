//===- ConvertMatMul.cpp - ONNX MatMul and Gemm -> smp --------------------===//

#include "NodeContext.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;

namespace smp::onnx_frontend {
namespace {

llvm::Error convertMatMul(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  return nc.output(nc.create<smp::MatMulOp>(nc.placeholder(), (*in)[0],
                                            (*in)[1], false, false));
}

/// `v * factor`, or `v` itself when the factor is 1.
llvm::Expected<Value> scaled(NodeContext &nc, Value v, float factor) {
  if (factor == 1.0f)
    return v;
  return nc.create<smp::MulOp>(nc.placeholder(), v, nc.scalarLike(v, factor));
}

/// Y = alpha * op(A) @ op(B) + beta * C, C broadcasting onto [M, N].
llvm::Error convertGemm(NodeContext &nc) {
  auto in = nc.inputs(2);
  if (!in)
    return in.takeError();
  Value a = (*in)[0], b = (*in)[1];
  if (tensorType(a).getRank() != 2 || tensorType(b).getRank() != 2)
    return nc.error("Gemm operands must be 2-D, got " +
                    llvm::Twine(tensorType(a).getRank()) + "-D and " +
                    llvm::Twine(tensorType(b).getRank()) + "-D");
  auto y = nc.create<smp::MatMulOp>(nc.placeholder(), a, b,
                                    nc.attrInt("transA", 0) != 0,
                                    nc.attrInt("transB", 0) != 0);
  if (!y)
    return y.takeError();
  float alpha = nc.attrFloat("alpha", 1.0f), beta = nc.attrFloat("beta", 1.0f);
  auto scaledY = scaled(nc, *y, alpha);
  if (!scaledY)
    return scaledY.takeError();
  Value result = *scaledY;
  auto c = nc.optionalInput(2);
  if (!c)
    return c.takeError();
  if (*c && beta != 0.0f) {
    auto bias = scaled(nc, *c, beta);
    if (!bias)
      return bias.takeError();
    auto sum = nc.create<smp::AddOp>(nc.placeholder(), result, *bias);
    if (!sum)
      return sum.takeError();
    if (tensorType(*sum) != tensorType(result))
      return nc.error("bias C does not broadcast onto the [M, N] product");
    result = *sum;
  }
  nc.setOutput(0, result);
  return llvm::Error::success();
}

} // namespace

void registerMatMulConverters(ConverterTable &t) {
  t["MatMul"] = convertMatMul;
  t["Gemm"] = convertGemm;
}

} // namespace smp::onnx_frontend
