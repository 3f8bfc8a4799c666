//===- SmpGatherOps.cpp - gather_nd / gather_elements and their grads -----===//
//
// Result types and verifiers of ONNX GatherND and GatherElements as smp ops,
// and of their scatter-add gradients (and of gather's). One shape rule per op family, shared
// by the forward's type inference and the gradient's verifier.
//
//===----------------------------------------------------------------------===//

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "llvm/ADT/STLExtras.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"

using namespace mlir;
using namespace smp;

namespace {

/// A gather gradient's incoming grad must be what its forward (`kind`)
/// returns: a `shape` tensor of the data's element type.
template <typename GradOp>
LogicalResult verifyForwardResult(GradOp op, ArrayRef<int64_t> shape,
                                  StringRef kind) {
  RankedTensorType grad = op.getGrad().getType(), data = op.getType();
  if (grad.getShape() == shape &&
      grad.getElementType() == data.getElementType())
    return success();
  return op.emitOpError("grad ")
         << grad << " is not the " << kind << " result of " << data;
}

/// "[2, 3]" (ONNX style, as the kernels' messages write shapes).
std::string dims(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") +
         (ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d));
  return s + "]";
}

/// gather_nd's result shape for data/indices shapes and batch_dims b, or a
/// reason why there is none.
FailureOr<SmallVector<int64_t>> gatherNdShape(ArrayRef<int64_t> data,
                                              ArrayRef<int64_t> indices,
                                              int64_t b, std::string &why) {
  int64_t r = data.size(), q = indices.size();
  if (q < 1 || r < 1) {
    why = "data and indices need rank >= 1";
    return failure();
  }
  if (b < 0 || b >= std::min(q, r)) {
    why = "batch_dims " + std::to_string(b) +
          " must be in [0, min(rank(data), rank(indices)))";
    return failure();
  }
  int64_t k = indices.back();
  if (ShapedType::isDynamic(k) || k < 1 || k > r - b) {
    why = "the last dim of indices (" +
          (ShapedType::isDynamic(k) ? std::string("?") : std::to_string(k)) +
          ") must be in [1, rank(data) - batch_dims = " +
          std::to_string(r - b) + "]";
    return failure();
  }
  for (int64_t d = 0; d < b; ++d)
    if (!ShapedType::isDynamic(data[d]) && !ShapedType::isDynamic(indices[d]) &&
        data[d] != indices[d]) {
      why = "batch dim " + std::to_string(d) + " differs: data " +
            dims(data) + ", indices " + dims(indices);
      return failure();
    }
  SmallVector<int64_t> out(indices.drop_back());
  llvm::append_range(out, data.drop_front(b + k));
  return out;
}

/// Checks gather_elements' shapes; the result has the indices' shape.
LogicalResult checkGatherElements(ArrayRef<int64_t> data,
                                  ArrayRef<int64_t> indices, int64_t axis,
                                  std::string &why) {
  if (data.size() != indices.size() || data.empty()) {
    why = "indices " + dims(indices) + " must have the rank of data " +
          dims(data) + " (>= 1)";
    return failure();
  }
  auto a = normalizeAxis(axis, data.size());
  if (!a) {
    why = "axis " + std::to_string(axis) + " out of range for rank " +
          std::to_string(data.size());
    return failure();
  }
  for (size_t d = 0; d < data.size(); ++d)
    if (static_cast<int64_t>(d) != *a && !ShapedType::isDynamic(data[d]) &&
        !ShapedType::isDynamic(indices[d]) && indices[d] > data[d]) {
      why = "indices " + dims(indices) + " exceed data " +
            dims(data) + " in dim " + std::to_string(d) +
            " (only the axis may be larger)";
      return failure();
    }
  return success();
}

RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

} // namespace

LogicalResult GatherNdOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           GatherNdOp::Adaptor adaptor,
                                           SmallVectorImpl<Type> &results) {
  auto data = rankedType(adaptor.getData());
  std::string why;
  auto out = gatherNdShape(data.getShape(),
                           rankedType(adaptor.getIndices()).getShape(),
                           static_cast<int64_t>(adaptor.getBatchDims()), why);
  if (failed(out))
    return emitOptionalError(loc, "'smp.gather_nd' ", why);
  results.push_back(data.clone(*out));
  return success();
}

LogicalResult
GatherElementsOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   GatherElementsOp::Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  std::string why;
  if (failed(checkGatherElements(data.getShape(), indices.getShape(),
                                 static_cast<int64_t>(adaptor.getAxis()), why)))
    return emitOptionalError(loc, "'smp.gather_elements' ", why);
  results.push_back(data.clone(indices.getShape()));
  return success();
}

LogicalResult GatherNdGradOp::verify() {
  auto data = getType();
  std::string why;
  auto expected =
      gatherNdShape(data.getShape(), getIndices().getType().getShape(),
                    static_cast<int64_t>(getBatchDims()), why);
  if (failed(expected))
    return emitOpError(why);
  return verifyForwardResult(*this, *expected, "gather_nd");
}

LogicalResult GatherGradOp::verify() {
  auto data = getType();
  auto indices = getIndices().getType();
  auto axis = normalizeAxis(static_cast<int64_t>(getAxis()), data.getRank());
  if (!axis)
    return emitOpError("axis out of range for ") << data;
  SmallVector<int64_t> expected(data.getShape().take_front(*axis));
  llvm::append_range(expected, indices.getShape());
  llvm::append_range(expected, data.getShape().drop_front(*axis + 1));
  return verifyForwardResult(*this, expected, "gather");
}

LogicalResult GatherElementsGradOp::verify() {
  auto data = getType();
  auto indices = getIndices().getType();
  std::string why;
  if (failed(checkGatherElements(data.getShape(), indices.getShape(),
                                 static_cast<int64_t>(getAxis()), why)))
    return emitOpError(why);
  if (getGrad().getType().getShape() != indices.getShape() ||
      getGrad().getType().getElementType() != data.getElementType())
    return emitOpError("grad ")
           << getGrad().getType() << " is not the gather_elements result of "
           << data << " at indices " << indices;
  return success();
}
