//===- SmpOps.cpp - smp ops: elementwise, linear algebra, norms, losses ---===//
//
// Result-type inference and verifiers. Data-movement, convolution and
// pooling ops live in SmpDataMovementOps.cpp.
//
//===----------------------------------------------------------------------===//

#include "smp/Dialect/Smp/IR/SmpOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"

using namespace mlir;
using namespace smp;

// Custom assembly of the generated parsers and printers (before them).

/// adam_update's `grad TYPE` when the gradient's type is not the
/// parameter's (an f16/bf16 gradient of an f32 parameter).
static ParseResult parseGradType(OpAsmParser &parser, Type &grad,
                                 Type param) {
  grad = param;
  if (failed(parser.parseOptionalKeyword("grad")))
    return success();
  return parser.parseType(grad);
}

static void printGradType(OpAsmPrinter &p, Operation *, Type grad,
                          Type param) {
  if (grad != param)
    p << "grad " << grad;
}

#define GET_OP_CLASSES
#include "smp/Dialect/Smp/IR/SmpOps.cpp.inc"

namespace {
RankedTensorType rankedType(Value v) {
  return cast<RankedTensorType>(v.getType());
}
} // namespace

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult ConstantOp::verify() {
  if (!isa<ElementsAttr>(getValue()))
    return emitOpError("value must be an elements attribute");
  if (!cast<RankedTensorType>(getType()).hasStaticShape())
    return emitOpError("constant must have a static shape");
  return success();
}

//===----------------------------------------------------------------------===//
// Binary elementwise ops
//===----------------------------------------------------------------------===//

static LogicalResult inferBroadcast(std::optional<Location> loc, Value lhs,
                                    Value rhs, Type resultElement,
                                    SmallVectorImpl<Type> &results,
                                    StringRef opName) {
  auto a = rankedType(lhs), b = rankedType(rhs);
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(loc, "'smp.", opName,
                             "' operands have different element types ",
                             a.getElementType(), " and ", b.getElementType());
  auto shape = broadcastShapes(a.getShape(), b.getShape());
  if (!shape)
    return emitOptionalError(loc, "'smp.", opName, "' cannot broadcast ",
                             a, " with ", b);
  results.push_back(RankedTensorType::get(
      *shape, resultElement ? resultElement : a.getElementType()));
  return success();
}

#define SMP_ARITH_INFER(OP, NAME)                                              \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, OP::Adaptor adaptor,         \
      SmallVectorImpl<Type> &results) {                                        \
    return inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), Type(),     \
                          results, NAME);                                      \
  }
#define SMP_BOOL_INFER(OP, NAME)                                               \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *ctx, std::optional<Location> loc, OP::Adaptor adaptor,      \
      SmallVectorImpl<Type> &results) {                                        \
    return inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(),             \
                          IntegerType::get(ctx, 1), results, NAME);            \
  }

SMP_ARITH_INFER(AddOp, "add")
SMP_ARITH_INFER(SubOp, "sub")
SMP_ARITH_INFER(MulOp, "mul")
SMP_ARITH_INFER(DivOp, "div")
SMP_ARITH_INFER(PowOp, "pow")
SMP_ARITH_INFER(MaxOp, "max")
SMP_ARITH_INFER(MinOp, "min")
SMP_BOOL_INFER(EqualOp, "equal")
SMP_BOOL_INFER(LessOp, "less")
SMP_BOOL_INFER(GreaterOp, "greater")
SMP_BOOL_INFER(AndOp, "and")
SMP_BOOL_INFER(OrOp, "or")

LogicalResult ModOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      ModOp::Adaptor adaptor,
                                      SmallVectorImpl<Type> &results) {
  return inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), Type(),
                        results, "mod");
}

LogicalResult ModOp::verify() {
  Type elt = getType().getElementType();
  if (elt.isInteger(1) || !(isa<IntegerType>(elt) || isa<FloatType>(elt)))
    return emitOpError("operands must be integers or floats, got ")
           << getLhs().getType();
  return success();
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        WhereOp::Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  SmallVector<Type, 1> values;
  if (failed(inferBroadcast(loc, adaptor.getLhs(), adaptor.getRhs(), Type(),
                            values, "where")))
    return failure();
  auto valueType = cast<RankedTensorType>(values.front());
  auto shape = broadcastShapes(rankedType(adaptor.getCondition()).getShape(),
                               valueType.getShape());
  if (!shape)
    return emitOptionalError(loc, "'smp.where' condition ",
                             adaptor.getCondition().getType(),
                             " does not broadcast with ", valueType);
  results.push_back(
      RankedTensorType::get(*shape, valueType.getElementType()));
  return success();
}

LogicalResult DropoutOp::verify() {
  float ratio = getRatio().convertToFloat();
  if (!(ratio >= 0 && ratio <= 1))
    return emitOpError("ratio must be in [0, 1], got ") << ratio;
  // I64Attr reads as uint64_t: the values are signed.
  auto value = [](uint64_t v) { return static_cast<int64_t>(v); };
  int64_t rank = getType().getRank(), dim = value(getTpDim());
  int64_t parts = value(getTpParts()), blocks = value(getTpBlocks());
  if (dim < -1 || dim >= rank || parts < 1 || blocks < 1)
    return emitOpError("tensor-parallel split of dim ")
           << dim << " into " << parts << " parts of " << blocks
           << " blocks does not fit a rank-" << rank << " tensor";
  if (value(getSamples()) < 0 || value(getSampleOffset()) < 0 ||
      value(getShardSamples()) < 0)
    return emitOpError("samples, sample_offset and shard_samples must be >= 0");
  return success();
}

//===----------------------------------------------------------------------===//
// MatMulOp
//===----------------------------------------------------------------------===//

/// numpy.matmul's result type of op(a) op(b) (op transposes the last two
/// dims when its flag is set), or an error naming `name`.
static FailureOr<RankedTensorType>
inferMatMulType(std::optional<Location> loc, StringRef name, Value lhs,
                Value rhs, bool transposeLhs, bool transposeRhs) {
  auto a = rankedType(lhs), b = rankedType(rhs);
  if (a.getElementType() != b.getElementType())
    return emitOptionalError(loc, "'", name, "' operands have different element types ",
                             a.getElementType(), " and ", b.getElementType());
  if (a.getRank() == 0 || b.getRank() == 0)
    return emitOptionalError(loc, "'", name, "' operands must not be scalars");
  SmallVector<int64_t> sa(a.getShape()), sb(b.getShape());
  bool promoteA = sa.size() == 1, promoteB = sb.size() == 1;
  if (promoteA)
    sa.insert(sa.begin(), 1);
  if (promoteB)
    sb.push_back(1);
  if (transposeLhs)
    std::swap(sa[sa.size() - 1], sa[sa.size() - 2]);
  if (transposeRhs)
    std::swap(sb[sb.size() - 1], sb[sb.size() - 2]);
  int64_t m = sa[sa.size() - 2], k = sa.back();
  int64_t k2 = sb[sb.size() - 2], n = sb.back();
  if (k != k2)
    return emitOptionalError(loc, "'", name, "' contraction mismatch: ", a,
                             " and ", b, " (", k, " vs ", k2, ")");
  auto batch = broadcastShapes(ArrayRef<int64_t>(sa).drop_back(2),
                               ArrayRef<int64_t>(sb).drop_back(2));
  if (!batch)
    return emitOptionalError(loc, "'", name, "' batch dims of ", a, " and ",
                             b, " do not broadcast");
  SmallVector<int64_t> out(*batch);
  if (!promoteA)
    out.push_back(m);
  if (!promoteB)
    out.push_back(n);
  return RankedTensorType::get(out, a.getElementType());
}

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         MatMulOp::Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferMatMulType(loc, "smp.matmul", adaptor.getLhs(), adaptor.getRhs(),
                      adaptor.getTransposeLhs(), adaptor.getTransposeRhs());
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

LogicalResult SumSquaresOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  for (Value v : getInputs()) {
    Type e = cast<RankedTensorType>(v.getType()).getElementType();
    if (!e.isF32() && !e.isF16() && !e.isBF16())
      return emitOpError("input ") << v.getType() << " is not f32, f16 or bf16";
  }
  auto t = cast<RankedTensorType>(getResult().getType());
  if (t.getRank() != 0 || !t.getElementType().isF32())
    return emitOpError("result ") << t << " is not tensor<f32>";
  return success();
}

LogicalResult CastMultiOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (getResults().size() != getInputs().size())
    return emitOpError("has ") << getInputs().size() << " inputs but "
                               << getResults().size() << " results";
  for (auto [in, out] : llvm::zip(getInputs(), getResults())) {
    auto a = cast<RankedTensorType>(in.getType());
    auto b = cast<RankedTensorType>(out.getType());
    if (a.getShape() != b.getShape())
      return emitOpError("result ")
             << b << " does not have the shape of its input " << a;
  }
  return success();
}

LogicalResult AddMultiOp::verify() {
  size_t n = getResults().size();
  if (n == 0)
    return emitOpError("needs at least one result");
  if (getInputs().size() != 2 * n)
    return emitOpError("has ") << getInputs().size() << " inputs but " << n
                               << " results (two inputs a result)";
  for (auto [i, out] : llvm::enumerate(getResults())) {
    auto t = cast<RankedTensorType>(out.getType());
    if (!t.getElementType().isF32())
      return emitOpError("result ") << t << " is not f32";
    for (Value in : {getLhs(i), getRhs(i)}) {
      auto a = cast<RankedTensorType>(in.getType());
      Type e = a.getElementType();
      if (!e.isF32() && !e.isF16() && !e.isBF16())
        return emitOpError("input ") << a << " is not f32, f16 or bf16";
      if (a.getShape() != t.getShape())
        return emitOpError("input ")
               << a << " does not have the shape of its result " << t;
    }
  }
  return success();
}

LogicalResult AllSliceMultiOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  if (getResults().size() != getInputs().size())
    return emitOpError("has ") << getInputs().size() << " inputs but "
                               << getResults().size() << " results";
  int64_t parts = 0;
  for (auto [in, out] : llvm::zip(getInputs(), getResults())) {
    auto a = cast<RankedTensorType>(in.getType());
    auto b = cast<RankedTensorType>(out.getType());
    bool chunk = a.getRank() >= 1 && a.getRank() == b.getRank() &&
                 a.getElementType() == b.getElementType() &&
                 a.getShape().drop_front() == b.getShape().drop_front() &&
                 b.getDimSize(0) > 0 && a.getDimSize(0) % b.getDimSize(0) == 0;
    if (!chunk)
      return emitOpError("result ")
             << b << " is not an equal part of dim 0 of its input " << a;
    int64_t k = a.getDimSize(0) / b.getDimSize(0);
    if (parts && k != parts)
      return emitOpError("cuts its inputs in ")
             << parts << " and in " << k << " parts: one rank count for all";
    parts = k;
  }
  return success();
}

/// matmul_bias's (and matmul_bias_gelu's) result type: the product's, with
/// a bias of its element type running along its last dim.
static FailureOr<RankedTensorType>
inferMatMulBiasType(std::optional<Location> loc, StringRef name, Value lhs,
                    Value rhs, Value biasValue, bool transposeLhs,
                    bool transposeRhs) {
  FailureOr<RankedTensorType> type =
      inferMatMulType(loc, name, lhs, rhs, transposeLhs, transposeRhs);
  if (failed(type))
    return failure();
  auto bias = rankedType(biasValue);
  if (rankedType(rhs).getRank() < 2)
    return emitOptionalError(loc, "'", name,
                             "' needs a rhs of rank 2 or more (the bias "
                             "runs along its columns)");
  if (bias.getElementType() != type->getElementType())
    return emitOptionalError(loc, "'", name, "' bias element type ",
                             bias.getElementType(), " is not the product's ",
                             type->getElementType());
  int64_t n = type->getShape().back();
  if (!isRowVector(bias.getShape(), n, type->getRank()))
    return emitOptionalError(loc, "'", name, "' bias ", bias,
                             " is neither [", n, "] nor [1, ..., 1, ", n,
                             "] for the product ", *type);
  return type;
}

/// inferMatMulBiasType of an op's adaptor (lhs, rhs, bias, the flags).
template <class Adaptor>
static FailureOr<RankedTensorType>
inferMatMulBiasType(std::optional<Location> loc, StringRef name, Adaptor a) {
  return inferMatMulBiasType(loc, name, a.getLhs(), a.getRhs(), a.getBias(),
                             a.getTransposeLhs(), a.getTransposeRhs());
}

LogicalResult MatMulBiasOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             MatMulBiasOp::Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferMatMulBiasType(loc, "smp.matmul_bias", adaptor);
  if (failed(type))
    return failure();
  results.push_back(*type);
  return success();
}

/// A product's addend (matmul_add, matmul_bias_add): of its type exactly.
static LogicalResult checkAddend(std::optional<Location> loc, StringRef name,
                                 Value addend, RankedTensorType product) {
  if (rankedType(addend) == product)
    return success();
  return emitOptionalError(loc, "'", name, "' addend ", rankedType(addend),
                           " is not the product's type ", product);
}

LogicalResult MatMulAddOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            MatMulAddOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferMatMulType(loc, "smp.matmul_add", adaptor.getLhs(), adaptor.getRhs(),
                      adaptor.getTransposeLhs(), adaptor.getTransposeRhs());
  if (failed(type) ||
      failed(checkAddend(loc, "smp.matmul_add", adaptor.getAddend(), *type)))
    return failure();
  results.push_back(*type);
  return success();
}

LogicalResult
MatMulBiasAddOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  MatMulBiasAddOp::Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferMatMulBiasType(loc, "smp.matmul_bias_add", adaptor);
  if (failed(type) || failed(checkAddend(loc, "smp.matmul_bias_add",
                                         adaptor.getAddend(), *type)))
    return failure();
  results.push_back(*type);
  return success();
}

LogicalResult
MatMulBiasGeluOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                   MatMulBiasGeluOp::Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> type =
      inferMatMulBiasType(loc, "smp.matmul_bias_gelu", adaptor);
  if (failed(type))
    return failure();
  results.append(2, *type); // result, preactivation
  return success();
}

LogicalResult MatMulBiasGradOp::verify() {
  auto lhs = rankedType(getLhs()), rhs = rankedType(getRhs());
  if (lhs.getRank() != 2 || rhs.getRank() != 2 ||
      lhs.getDimSize(0) != rhs.getDimSize(0) ||
      lhs.getElementType() != rhs.getElementType())
    return emitOpError("needs lhs [M, N] and rhs [M, K] of one element type, "
                       "not ")
           << lhs << " and " << rhs;
  auto want = RankedTensorType::get({lhs.getDimSize(1), rhs.getDimSize(1)},
                                    lhs.getElementType());
  if (getResult().getType() != want)
    return emitOpError("result ")
           << getResult().getType() << " is not lhs^T rhs " << want;
  auto bias = rankedType(getBiasGrad());
  int64_t n = lhs.getDimSize(1);
  if (bias.getElementType() != lhs.getElementType() ||
      !isRowVector(bias.getShape(), n, bias.getRank()))
    return emitOpError("bias_grad ")
           << bias << " is neither [" << n << "] nor [1, ..., 1, " << n
           << "] of lhs's element type";
  return success();
}

LogicalResult MatMulGeluGradOp::verify() {
  FailureOr<RankedTensorType> type =
      inferMatMulType(getLoc(), "smp.matmul_gelu_grad", getLhs(), getRhs(),
                      getTransposeLhs(), getTransposeRhs());
  if (failed(type))
    return failure();
  if (getPreactivation().getType() != *type ||
      getInputGrad().getType() != *type)
    return emitOpError("preactivation ")
           << getPreactivation().getType() << " and input_grad "
           << getInputGrad().getType() << " must both be the product's type "
           << *type;
  auto bias = rankedType(getBiasGrad());
  int64_t n = type->getShape().back();
  if (type->getRank() < 2 || bias.getElementType() != type->getElementType() ||
      !isRowVector(bias.getShape(), n, type->getRank()))
    return emitOpError("bias_grad ")
           << bias << " is neither [" << n << "] nor [1, ..., 1, " << n
           << "] of the product's element type for the product " << *type;
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult inferReduce(std::optional<Location> loc, Value input,
                                 ArrayRef<int64_t> axes, bool keepdims,
                                 SmallVectorImpl<Type> &results) {
  auto type = rankedType(input);
  int64_t rank = type.getRank();
  SmallVector<bool> reduced(rank, false);
  for (int64_t axis : axes) {
    auto norm = normalizeAxis(axis, rank);
    if (!norm)
      return emitOptionalError(loc, "reduction axis ", axis,
                               " out of range for rank ", rank);
    if (reduced[*norm])
      return emitOptionalError(loc, "reduction axis ", axis, " repeated");
    reduced[*norm] = true;
  }
  SmallVector<int64_t> out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      out.push_back(type.getDimSize(d));
    else if (keepdims)
      out.push_back(1);
  }
  results.push_back(RankedTensorType::get(out, type.getElementType()));
  return success();
}

#define SMP_REDUCE_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, OP::Adaptor adaptor,         \
      SmallVectorImpl<Type> &results) {                                        \
    return inferReduce(loc, adaptor.getInput(), adaptor.getAxes(),             \
                       adaptor.getKeepdims(), results);                        \
  }
SMP_REDUCE_INFER(ReduceSumOp)
SMP_REDUCE_INFER(ReduceMeanOp)
SMP_REDUCE_INFER(ReduceMaxOp)

//===----------------------------------------------------------------------===//
// Softmax, norms, losses
//===----------------------------------------------------------------------===//

template <typename OpT> static LogicalResult verifySoftmaxAxis(OpT op) {
  int64_t rank = op.getType().getRank();
  if (!normalizeAxis(static_cast<int64_t>(op.getAxis()), rank))
    return op.emitOpError("axis ")
           << static_cast<int64_t>(op.getAxis()) << " out of range for rank "
           << rank;
  return success();
}
LogicalResult SoftmaxOp::verify() { return verifySoftmaxAxis(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmaxAxis(*this); }

LogicalResult CumSumOp::verify() {
  int64_t rank = getType().getRank();
  if (!normalizeAxis(static_cast<int64_t>(getAxis()), rank))
    return emitOpError("axis ") << static_cast<int64_t>(getAxis())
                                << " out of range for rank " << rank;
  Type elt = getType().getElementType();
  if (elt.isInteger(1) || !(isa<IntegerType>(elt) || isa<FloatType>(elt)))
    return emitOpError("input must hold integers or floats, got ")
           << getType();
  return success();
}

/// Checks that `param` broadcasts onto the trailing `normShape` dims.
static LogicalResult checkNormParam(std::optional<Location> loc, Value param,
                                    ArrayRef<int64_t> normShape,
                                    StringRef what, StringRef opName) {
  auto type = rankedType(param);
  auto shape = broadcastShapes(normShape, type.getShape());
  if (!shape || ArrayRef<int64_t>(*shape) != normShape)
    return emitOptionalError(loc, "'smp.", opName, "' ", what, " ", type,
                             " does not match normalized shape ",
                             shapeToString(normShape));
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            LayerNormOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto type = rankedType(adaptor.getInput());
  auto axis = normalizeAxis(static_cast<int64_t>(adaptor.getAxis()),
                            type.getRank());
  if (!axis)
    return emitOptionalError(loc, "'smp.layer_norm' axis ",
                             static_cast<int64_t>(adaptor.getAxis()),
                             " out of range for ", type);
  auto normShape = type.getShape().drop_front(*axis);
  if (failed(checkNormParam(loc, adaptor.getScale(), normShape, "scale",
                            "layer_norm")))
    return failure();
  if (adaptor.getBias() &&
      failed(checkNormParam(loc, adaptor.getBias(), normShape, "bias",
                            "layer_norm")))
    return failure();
  results.push_back(type);
  return success();
}

LogicalResult RmsNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          RmsNormOp::Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  auto type = rankedType(adaptor.getInput());
  if (type.getRank() == 0)
    return emitOptionalError(loc, "'smp.rms_norm' input must not be a scalar");
  if (failed(checkNormParam(loc, adaptor.getScale(),
                            type.getShape().take_back(1), "scale",
                            "rms_norm")))
    return failure();
  results.push_back(type);
  return success();
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            BatchNormOp::Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  auto type = rankedType(adaptor.getInput());
  if (type.getRank() < 2)
    return emitOptionalError(loc, "'smp.batch_norm' input needs a channel dim");
  int64_t c = type.getDimSize(1);
  for (Value v : {adaptor.getScale(), adaptor.getBias(), adaptor.getMean(),
                  adaptor.getVariance()}) {
    auto t = rankedType(v);
    if (t.getRank() != 1 || t.getDimSize(0) != c)
      return emitOptionalError(loc, "'smp.batch_norm' per-channel operand ",
                               t, " does not match ", c, " channels");
  }
  results.push_back(type);
  return success();
}

LogicalResult smp::crossEntropyClasses(std::optional<Location> loc,
                                       StringRef op, RankedTensorType logits,
                                       std::optional<int64_t> attr,
                                       int64_t &classes) {
  int64_t row = logits.getShape().back();
  classes = attr.value_or(row);
  if (classes < 1 || classes > row)
    return emitOptionalError(loc, op, " classes = ", classes,
                             " must be in [1, ", row, "], the last dim of ",
                             logits);
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, CrossEntropyOp::Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  auto logits = rankedType(adaptor.getLogits());
  auto labels = rankedType(adaptor.getLabels());
  if (logits.getRank() < 1 ||
      logits.getShape().drop_back() != labels.getShape())
    return emitOptionalError(loc, "'smp.cross_entropy' labels ", labels,
                             " must have the shape of logits ", logits,
                             " without its last (class) dim");
  int64_t classes;
  if (failed(crossEntropyClasses(loc, "'smp.cross_entropy'", logits,
                                 adaptor.getClasses(), classes)))
    return failure();
  if (Value weights = adaptor.getWeights()) {
    auto w = rankedType(weights);
    if (w.getRank() != 1 || w.getDimSize(0) != classes ||
        w.getElementType() != logits.getElementType())
      return emitOptionalError(loc, "'smp.cross_entropy' weights ", w,
                               " must be a vector of the ", classes,
                               " classes of ", logits);
  }
  if (adaptor.getReduction() == Reduction::none)
    results.push_back(logits.clone(labels.getShape()));
  else
    results.push_back(logits.clone(ArrayRef<int64_t>{}));
  return success();
}

/// The inferred loss type, or the same shape in f32 for f16/bf16 logits.
bool CrossEntropyOp::isCompatibleReturnTypes(TypeRange inferred,
                                             TypeRange actual) {
  if (inferred.size() != 1 || actual.size() != 1)
    return false;
  if (inferred[0] == actual[0])
    return true;
  auto in = dyn_cast<RankedTensorType>(inferred[0]);
  auto act = dyn_cast<RankedTensorType>(actual[0]);
  return in && act && in.getShape() == act.getShape() &&
         (in.getElementType().isF16() || in.getElementType().isBF16()) &&
         act.getElementType().isF32();
}

//===----------------------------------------------------------------------===//
// MatMulOp canonicalization
//===----------------------------------------------------------------------===//

namespace {
/// Whether `perm` swaps the last two dims and keeps the others: the
/// transpose a matrix product's flags express.
bool swapsLastTwoDims(ArrayRef<int64_t> perm) {
  int64_t n = static_cast<int64_t>(perm.size());
  if (n < 2 || perm[n - 1] != n - 2 || perm[n - 2] != n - 1)
    return false;
  for (int64_t k = 0; k + 2 < n; ++k)
    if (perm[k] != k)
      return false;
  return true;
}

/// matmul(transpose(x) [last two dims swapped], y) -> matmul(x, y) with the
/// operand's transpose flag flipped (and likewise for the rhs).
struct FoldTransposeIntoMatMul : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp mm,
                                PatternRewriter &rewriter) const override {
    for (unsigned which : {0u, 1u}) {
      auto t = mm->getOperand(which).getDefiningOp<TransposeOp>();
      if (!t)
        continue;
      if (!swapsLastTwoDims(t.getPerm()))
        continue;
      rewriter.modifyOpInPlace(mm, [&] {
        mm->setOperand(which, t.getInput());
        if (which == 0)
          mm.setTransposeLhs(!mm.getTransposeLhs());
        else
          mm.setTransposeRhs(!mm.getTransposeRhs());
      });
      return success();
    }
    return failure();
  }
};

/// transpose(matmul(a, b)) [last two dims swapped] -> matmul(b, a) with both
/// flags flipped: (op(A) op(B))^T = op(B)^T op(A)^T. The weight gradient
/// x^T dy of a [out, in] weight is then computed as dy^T x in the weight's
/// layout, without a transposed copy. Only for a product used once, whose
/// operands are matrices (rank-1 operands change the result's rank).
struct FoldTransposeOfMatMul : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp t,
                                PatternRewriter &rewriter) const override {
    auto mm = t.getInput().getDefiningOp<MatMulOp>();
    if (!mm || !mm->hasOneUse())
      return failure();
    if (!swapsLastTwoDims(t.getPerm()))
      return failure();
    for (Value operand : mm->getOperands())
      if (cast<RankedTensorType>(operand.getType()).getRank() < 2)
        return failure();
    rewriter.modifyOpInPlace(mm, [&] {
      Value lhs = mm.getLhs(), rhs = mm.getRhs();
      bool tl = mm.getTransposeLhs(), tr = mm.getTransposeRhs();
      mm->setOperand(0, rhs);
      mm->setOperand(1, lhs);
      mm.setTransposeLhs(!tr);
      mm.setTransposeRhs(!tl);
      mm.getResult().setType(t.getType());
    });
    rewriter.replaceOp(t, mm.getResult());
    return success();
  }
};
} // namespace

void MatMulOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                           MLIRContext *context) {
  results.add<FoldTransposeIntoMatMul>(context);
}

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<FoldTransposeOfMatMul>(context);
}
