//===- SmpDataMovementOps.cpp - reshape/slice/gather/conv/pool ops --------===//

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Support/CheckedMath.h"

using namespace mlir;
using namespace smp;

static RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

//===----------------------------------------------------------------------===//
// Reshape / Expand
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type changes from ")
           << in.getElementType() << " to " << out.getElementType();
  if (!in.hasStaticShape() || !out.hasStaticShape())
    return emitOpError("requires static shapes");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << in << " (" << in.getNumElements() << " elements) to " << out
           << " (" << out.getNumElements() << " elements)";
  return success();
}

/// A reshape is a view: the runtime aliases its result to its input.
Value ReshapeOp::getViewSource() { return getInput(); }

/// tp_copy is the identity in the forward: a view of its input.
Value TpCopyOp::getViewSource() { return getInput(); }

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getInput()))
    return dense.reshape(getType());
  return {};
}

LogicalResult ExpandOp::verify() {
  auto in = getInput().getType(), out = getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("element type changes from ")
           << in.getElementType() << " to " << out.getElementType();
  auto shape = broadcastShapes(in.getShape(), out.getShape());
  if (!shape || ArrayRef<int64_t>(*shape) != out.getShape())
    return emitOpError("cannot broadcast ") << in << " to " << out;
  return success();
}

//===----------------------------------------------------------------------===//
// Transpose / Tile / Slice / Concat / Split / Gather / Trilu
//===----------------------------------------------------------------------===//

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            TransposeOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto type = rankedType(adaptor.getInput());
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if (static_cast<int64_t>(perm.size()) != type.getRank())
    return emitOptionalError(loc, "'smp.transpose' permutation of size ",
                             perm.size(), " for rank ", type.getRank());
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> out;
  for (int64_t p : perm) {
    if (p < 0 || p >= type.getRank() || seen[p])
      return emitOptionalError(loc, "'smp.transpose' invalid permutation");
    seen[p] = true;
    out.push_back(type.getDimSize(p));
  }
  results.push_back(type.clone(out));
  return success();
}

LogicalResult TileOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       TileOp::Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  auto type = rankedType(adaptor.getInput());
  ArrayRef<int64_t> repeats = adaptor.getRepeats();
  if (static_cast<int64_t>(repeats.size()) != type.getRank())
    return emitOptionalError(loc, "'smp.tile' has ", repeats.size(),
                             " repeats for rank ", type.getRank());
  SmallVector<int64_t> out;
  for (auto [d, r] : llvm::zip(type.getShape(), repeats)) {
    std::optional<int64_t> n = checkedMul(d, r);
    if (r < 0 || !n)
      return emitOptionalError(loc, "'smp.tile' invalid repeat ", r,
                               " of a dim of size ", d);
    out.push_back(*n);
  }
  if (!checkedElementCount(out))
    return emitOptionalError(loc, "'smp.tile' result is too large");
  results.push_back(type.clone(out));
  return success();
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        SliceOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto type = rankedType(adaptor.getInput());
  ArrayRef<int64_t> starts = adaptor.getStarts(), limits = adaptor.getLimits(),
                    steps = adaptor.getSteps();
  int64_t rank = type.getRank();
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(limits.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank)
    return emitOptionalError(loc, "'smp.slice' needs one start, limit and "
                                  "step per dimension of ",
                             type);
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t dim = type.getDimSize(d);
    if (steps[d] == 0)
      return emitOptionalError(loc, "'smp.slice' step 0 in dim ", d);
    bool ok = steps[d] > 0
                  ? (starts[d] >= 0 && starts[d] <= dim && limits[d] >= 0 &&
                     limits[d] <= dim)
                  : (starts[d] >= -1 && starts[d] < dim && limits[d] >= -1 &&
                     limits[d] < dim);
    if (!ok)
      return emitOptionalError(loc, "'smp.slice' bounds [", starts[d], ", ",
                               limits[d], ") out of range in dim ", d,
                               " of size ", dim);
    out.push_back(sliceLength(starts[d], limits[d], steps[d]));
  }
  results.push_back(type.clone(out));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         ConcatOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto inputs = adaptor.getInputs();
  if (inputs.empty())
    return emitOptionalError(loc, "'smp.concat' needs at least one input");
  auto first = rankedType(inputs.front());
  auto axis =
      normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), first.getRank());
  if (!axis)
    return emitOptionalError(loc, "'smp.concat' axis out of range for ",
                             first);
  SmallVector<int64_t> out(first.getShape());
  out[*axis] = 0;
  for (Value v : inputs) {
    auto t = rankedType(v);
    if (t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return emitOptionalError(loc, "'smp.concat' operand ", t,
                               " does not match ", first);
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != *axis && t.getDimSize(d) != first.getDimSize(d))
        return emitOptionalError(loc, "'smp.concat' operand ", t,
                                 " differs from ", first, " in dim ", d);
    auto sum = checkedAdd(out[*axis], t.getDimSize(*axis));
    if (!sum)
      return emitOptionalError(loc, "'smp.concat' size along axis ", *axis,
                               " overflows");
    out[*axis] = *sum;
  }
  results.push_back(first.clone(out));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        SplitOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  auto type = rankedType(adaptor.getInput());
  auto axis =
      normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), type.getRank());
  if (!axis)
    return emitOptionalError(loc, "'smp.split' axis out of range for ", type);
  int64_t total = 0;
  for (int64_t size : adaptor.getSizes()) {
    if (size < 0)
      return emitOptionalError(loc, "'smp.split' negative size ", size);
    auto sum = checkedAdd(total, size);
    if (!sum)
      return emitOptionalError(loc, "'smp.split' sizes overflow");
    total = *sum;
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = size;
    results.push_back(type.clone(shape));
  }
  if (total != type.getDimSize(*axis))
    return emitOptionalError(loc, "'smp.split' sizes sum to ", total,
                             " but dim ", *axis, " of ", type, " is ",
                             type.getDimSize(*axis));
  return success();
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         GatherOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  auto data = rankedType(adaptor.getData());
  auto indices = rankedType(adaptor.getIndices());
  auto axis =
      normalizeAxis(static_cast<int64_t>(adaptor.getAxis()), data.getRank());
  if (!axis)
    return emitOptionalError(loc, "'smp.gather' axis out of range for ", data);
  SmallVector<int64_t> out(data.getShape().take_front(*axis));
  llvm::append_range(out, indices.getShape());
  llvm::append_range(out, data.getShape().drop_front(*axis + 1));
  results.push_back(data.clone(out));
  return success();
}

LogicalResult TriluOp::verify() {
  if (getType().getRank() < 2)
    return emitOpError("input must have rank >= 2, got ") << getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// Checks window attributes against `spatial` dims and computes the output
/// spatial sizes.
static LogicalResult inferWindow(std::optional<Location> loc, StringRef op,
                                 RankedTensorType input,
                                 ArrayRef<int64_t> kernel,
                                 ArrayRef<int64_t> strides,
                                 ArrayRef<int64_t> pads,
                                 ArrayRef<int64_t> dilations, bool ceilMode,
                                 SmallVectorImpl<int64_t> &outSpatial) {
  int64_t spatial = input.getRank() - 2;
  if (spatial < 1)
    return emitOptionalError(loc, "'smp.", op,
                             "' input must be [N, C, spatial...], got ",
                             input);
  if (static_cast<int64_t>(kernel.size()) != spatial ||
      static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(dilations.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return emitOptionalError(loc, "'smp.", op, "' expects ", spatial,
                             " kernel/stride/dilation values and ",
                             2 * spatial, " pads");
  for (int64_t i = 0; i < spatial; ++i) {
    int64_t in = input.getDimSize(2 + i);
    auto padded = checkedAdd(in, pads[i]);
    if (pads[i] >= 0 && pads[spatial + i] >= 0 && kernel[i] > 0 &&
        dilations[i] > 0 &&
        (!padded || !checkedAdd(*padded, pads[spatial + i]) ||
         !checkedMul(dilations[i], kernel[i] - 1)))
      return emitOptionalError(loc, "'smp.", op, "' pads ", pads[i], ", ",
                               pads[spatial + i], " or dilation ",
                               dilations[i], " of spatial dim ", i,
                               " overflow the size arithmetic");
    auto size = windowOutputSize(input.getDimSize(2 + i), kernel[i],
                                 strides[i], pads[i], pads[spatial + i],
                                 dilations[i], ceilMode);
    if (!size || *size <= 0)
      return emitOptionalError(loc, "'smp.", op, "' window ", kernel[i],
                               " (stride ", strides[i], ", dilation ",
                               dilations[i], ") does not fit spatial dim ", i,
                               " of ", input);
    outSpatial.push_back(*size);
  }
  return success();
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       ConvOp::Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  auto input = rankedType(adaptor.getInput());
  auto weight = rankedType(adaptor.getWeight());
  int64_t group = static_cast<int64_t>(adaptor.getGroup());
  if (weight.getRank() != input.getRank())
    return emitOptionalError(loc, "'smp.conv' weight ", weight,
                             " rank differs from input ", input);
  if (group <= 0 || input.getDimSize(1) != weight.getDimSize(1) * group ||
      weight.getDimSize(0) % group != 0)
    return emitOptionalError(loc, "'smp.conv' input channels ",
                             input.getDimSize(1), " do not match weight ",
                             weight, " with group ", group);
  SmallVector<int64_t> spatial;
  if (failed(inferWindow(loc, "conv", input, weight.getShape().drop_front(2),
                         adaptor.getStrides(), adaptor.getPads(),
                         adaptor.getDilations(), false, spatial)))
    return failure();
  if (adaptor.getBias()) {
    auto bias = rankedType(adaptor.getBias());
    if (bias.getRank() != 1 || bias.getDimSize(0) != weight.getDimSize(0))
      return emitOptionalError(loc, "'smp.conv' bias ", bias,
                               " does not match ", weight.getDimSize(0),
                               " output channels");
  }
  SmallVector<int64_t> out{input.getDimSize(0), weight.getDimSize(0)};
  llvm::append_range(out, spatial);
  results.push_back(input.clone(out));
  return success();
}

#define SMP_POOL_INFER(OP, NAME)                                               \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, OP::Adaptor adaptor,         \
      SmallVectorImpl<Type> &results) {                                        \
    auto input = rankedType(adaptor.getInput());                              \
    SmallVector<int64_t> out{input.getDimSize(0), input.getDimSize(1)};        \
    if (input.getRank() < 3)                                                   \
      return emitOptionalError(loc, "'smp." NAME "' input must be [N, C, "     \
                                    "spatial...], got ",                       \
                               input);                                         \
    SmallVector<int64_t> spatial;                                              \
    if (failed(inferWindow(loc, NAME, input, adaptor.getKernel(),              \
                           adaptor.getStrides(), adaptor.getPads(),            \
                           adaptor.getDilations(), adaptor.getCeilMode(),      \
                           spatial)))                                          \
      return failure();                                                        \
    llvm::append_range(out, spatial);                                          \
    results.push_back(input.clone(out));                                       \
    return success();                                                          \
  }
SMP_POOL_INFER(MaxPoolOp, "max_pool")
SMP_POOL_INFER(AvgPoolOp, "avg_pool")
