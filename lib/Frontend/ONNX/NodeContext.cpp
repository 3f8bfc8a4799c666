//===- NodeContext.cpp - What an ONNX op converter sees -------------------===//

#include "NodeContext.h"

#include "GraphImporter.h"
#include "ModelLoader.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "smp/Dialect/Smp/IR/ShapeUtils.h"
#include "smp/Dialect/Smp/IR/SmpOps.h"
#include "smp/Support/CheckedMath.h"

using namespace mlir;

namespace smp::onnx_frontend {

/// Bytes of a constant of `type`; nullopt on overflow.
static std::optional<int64_t> constantBytes(ShapedType type) {
  return checkedByteSize(type.getShape(),
                         type.getElementType().getIntOrFloatBitWidth());
}

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}
SmallVector<int64_t> shapeOf(Value v) {
  return SmallVector<int64_t>(tensorType(v).getShape());
}

NodeContext::NodeContext(GraphImporter &importer, const onnx::NodeProto &node,
                         int nodeIndex, Location loc)
    : importer_(importer), node_(node), nodeIndex_(nodeIndex), loc_(loc) {}

OpBuilder &NodeContext::builder() { return importer_.builder; }
MLIRContext *NodeContext::context() { return &importer_.ctx; }
int64_t NodeContext::opset() const { return importer_.opset; }
llvm::StringRef NodeContext::modelDir() const { return importer_.modelDir; }
bool NodeContext::training() const { return importer_.training(); }
bool NodeContext::noDropout() const { return importer_.noDropout(); }
bool NodeContext::fuseAttention() const { return importer_.fuseAttention(); }
bool NodeContext::stopsGradient() const {
  return importer_.stopsGradient(node_.name());
}
int64_t NodeContext::paddingRow(llvm::StringRef name) {
  return importer_.takePaddingRow(name);
}
void NodeContext::noteDroppedDropout() { ++importer_.droppedDropouts; }
int64_t NodeContext::nextDropoutStream() { return importer_.dropouts++; }
void NodeContext::warnOnce(llvm::StringRef key, const llvm::Twine &msg) {
  // The text names the file and the node (with its op type) as errors do;
  // the node's location would name them again.
  if (importer_.warned.insert(key).second)
    mlir::emitWarning(UnknownLoc::get(context()))
        << importer_.path << ": " << describeNode(node_, nodeIndex_) << ": "
        << msg;
}

llvm::Error NodeContext::error(const llvm::Twine &msg) const {
  return importer_.error(describeNode(node_, nodeIndex_) + ": " + msg);
}

llvm::Expected<Value> NodeContext::input(unsigned i) {
  if (!hasInput(i))
    return error("missing required input #" + llvm::Twine(i));
  auto v = importer_.lookup(node_.input(i));
  if (!v)
    return error(llvm::toString(v.takeError()));
  return *v;
}

llvm::Expected<SmallVector<Value>> NodeContext::inputs(unsigned count) {
  SmallVector<Value> values;
  for (unsigned i = 0; i < count; ++i) {
    auto v = input(i);
    if (!v)
      return v.takeError();
    values.push_back(*v);
  }
  return values;
}

llvm::Expected<Value> NodeContext::optionalInput(unsigned i) {
  if (!hasInput(i))
    return Value();
  return input(i);
}

DenseElementsAttr NodeContext::constantInput(unsigned i) {
  if (!hasInput(i))
    return {};
  auto v = importer_.lookup(node_.input(i));
  if (!v) {
    llvm::consumeError(v.takeError());
    return {};
  }
  DenseElementsAttr attr;
  if (!matchPattern(*v, m_Constant(&attr)))
    return {};
  return attr;
}

llvm::Expected<SmallVector<int64_t>>
NodeContext::constantInts(unsigned i, llvm::StringRef what) {
  if (!hasInput(i))
    return error("missing input '" + what + "'");
  DenseElementsAttr attr = constantInput(i);
  if (!attr || !isa<IntegerType>(attr.getElementType()))
    return error("input '" + node_.input(i) + "' (" + what +
                 ") must be a compile-time integer constant; if it depends "
                 "on a symbolic dim, bind it with --dim NAME=VALUE");
  if (attr.getNumElements() > (int64_t(1) << 20))
    return error("input '" + node_.input(i) + "' (" + what +
                 ") is too large");
  SmallVector<int64_t> out;
  for (const APInt &v : attr.getValues<APInt>())
    out.push_back(v.getSExtValue());
  return out;
}

llvm::Expected<int64_t> NodeContext::constantInt(unsigned i,
                                                 llvm::StringRef what) {
  auto ints = constantInts(i, what);
  if (!ints)
    return ints.takeError();
  if (ints->size() != 1)
    return error("input '" + node_.input(i) + "' (" + what +
                 ") must hold one integer, got " + llvm::Twine(ints->size()));
  return ints->front();
}

llvm::Expected<SmallVector<double>>
NodeContext::constantFloats(unsigned i, llvm::StringRef what) {
  SmallVector<double> out;
  if (!hasInput(i))
    return out;
  DenseElementsAttr attr = constantInput(i);
  if (!attr || !isa<FloatType>(attr.getElementType()))
    return error("input '" + node_.input(i) + "' (" + what +
                 ") must be a constant float tensor");
  for (const APFloat &v : attr.getValues<APFloat>())
    out.push_back(v.convertToDouble());
  return out;
}

llvm::Expected<double> NodeContext::constantScalar(unsigned i,
                                                   llvm::StringRef what) {
  DenseElementsAttr attr = constantInput(i);
  if (!attr || attr.getNumElements() != 1)
    return error("input '" + (hasInput(i) ? node_.input(i) : std::string()) +
                 "' (" + what + ") must be a compile-time scalar constant");
  if (isa<FloatType>(attr.getElementType()))
    return (*attr.getValues<APFloat>().begin()).convertToDouble();
  return static_cast<double>((*attr.getValues<APInt>().begin()).getSExtValue());
}

const onnx::AttributeProto *NodeContext::attr(llvm::StringRef name) const {
  for (const auto &a : node_.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t NodeContext::attrInt(llvm::StringRef name, int64_t def) const {
  const auto *a = attr(name);
  return a ? a->i() : def;
}
float NodeContext::attrFloat(llvm::StringRef name, float def) const {
  const auto *a = attr(name);
  return a ? a->f() : def;
}
std::string NodeContext::attrString(llvm::StringRef name,
                                    llvm::StringRef def) const {
  const auto *a = attr(name);
  return a ? a->s() : def.str();
}
llvm::Expected<int64_t> NodeContext::attrAxis(int64_t def,
                                              int64_t rank) const {
  int64_t raw = attrInt("axis", def);
  if (auto axis = normalizeAxis(raw, rank))
    return *axis;
  return error("axis " + llvm::Twine(raw) + " out of range");
}

SmallVector<int64_t> NodeContext::attrInts(llvm::StringRef name) const {
  const auto *a = attr(name);
  if (!a)
    return {};
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

llvm::Expected<llvm::ArrayRef<Value>> NodeContext::sequenceInput(unsigned i) {
  if (!hasInput(i))
    return error("missing required input #" + llvm::Twine(i));
  auto seq = importer_.lookupSequence(node_.input(i));
  if (!seq)
    return error(llvm::toString(seq.takeError()));
  return *seq;
}

void NodeContext::setSequenceOutput(unsigned i, llvm::ArrayRef<Value> values) {
  if (hasOutput(i))
    importer_.defineSequence(node_.output(i), values);
}

void NodeContext::setOutput(unsigned i, Value v) {
  if (hasOutput(i))
    importer_.define(node_.output(i), v);
}

Type NodeContext::placeholder() { return NoneType::get(context()); }

llvm::Expected<SmallVector<Value>> NodeContext::finish(Operation *op) {
  importer_.lastDiagnostic.clear();
  if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(
            context(), op->getLoc(), op->getOperands(),
            op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
            op->getRegions(), types)) ||
        types.size() != op->getNumResults()) {
      std::string msg = importer_.lastDiagnostic;
      op->erase();
      return error(msg.empty() ? "cannot infer the result type" : msg);
    }
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
  }
  if (failed(mlir::verify(op, /*verifyRecursively=*/false))) {
    std::string msg = importer_.lastDiagnostic;
    op->erase();
    return error(msg.empty() ? "invalid operation" : msg);
  }
  // Fold when operands are constants (shape subgraphs, masks, ...).
  SmallVector<Attribute> constants;
  for (Value operand : op->getOperands()) {
    Attribute attr;
    matchPattern(operand, m_Constant(&attr));
    constants.push_back(attr);
  }
  SmallVector<Value> results(op->getResults());
  SmallVector<OpFoldResult> folded;
  // A fold into a constant over kMaxConstantBytes (a splat expanded to
  // [2^20, 2^20], say) is not taken: the op stays and runs at run time.
  auto tooLarge = [](ArrayRef<OpFoldResult> results) {
    for (OpFoldResult f : results) {
      auto attr = dyn_cast_if_present<TypedAttr>(dyn_cast<Attribute>(f));
      auto type = attr ? dyn_cast<ShapedType>(attr.getType()) : ShapedType();
      if (!type || !type.hasStaticShape() ||
          !type.getElementType().isIntOrFloat())
        continue;
      auto bytes = constantBytes(type);
      if (!bytes || *bytes > kMaxConstantBytes)
        return true;
    }
    return false;
  };
  if (!op->hasTrait<OpTrait::ConstantLike>() &&
      succeeded(op->fold(constants, folded)) && !folded.empty() &&
      !tooLarge(folded)) {
    for (auto [i, f] : llvm::enumerate(folded)) {
      if (auto v = dyn_cast<Value>(f)) {
        results[i] = v;
        continue;
      }
      auto typed = cast<TypedAttr>(cast<Attribute>(f));
      results[i] = ConstantOp::create(builder(), loc_, typed);
    }
    op->erase();
  }
  return results;
}

Value NodeContext::splat(Type elementType, ArrayRef<int64_t> shape,
                         double value) {
  auto type = RankedTensorType::get(shape, elementType);
  auto bytes = constantBytes(type);
  if (!bytes || *bytes > kMaxConstantBytes) // too large for the weights file
    return filled(elementType, shape, value);
  return constantOf(elementType, shape, ArrayRef<double>(value));
}

Value NodeContext::filled(Type elementType, ArrayRef<int64_t> shape,
                          double value) {
  SmallVector<int64_t> ones(shape.size(), 1);
  Value one = constantOf(elementType, ones, ArrayRef<double>(value));
  if (ArrayRef<int64_t>(ones) == shape)
    return one;
  return ExpandOp::create(builder(), loc_,
                          RankedTensorType::get(shape, elementType), one);
}

Value NodeContext::constantOf(Type elementType, ArrayRef<int64_t> shape,
                              ArrayRef<double> values) {
  auto type = RankedTensorType::get(shape, elementType);
  DenseElementsAttr attr;
  if (auto ft = dyn_cast<FloatType>(elementType)) {
    SmallVector<APFloat> v;
    for (double d : values) {
      APFloat f(d);
      bool loses;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &loses);
      v.push_back(f);
    }
    attr = DenseElementsAttr::get(type, v);
  } else {
    unsigned width = cast<IntegerType>(elementType).getWidth();
    SmallVector<APInt> v;
    for (double d : values)
      v.push_back(width == 1 ? APInt(1, d != 0)
                             : APInt(width, static_cast<int64_t>(d), true));
    attr = DenseElementsAttr::get(type, v);
  }
  return ConstantOp::create(builder(), loc_, cast<TypedAttr>(attr));
}

Value NodeContext::scalarLike(Value like, double value) {
  return splat(tensorType(like).getElementType(), {}, value);
}

llvm::Expected<Value> NodeContext::castTo(Value v, Type elementType) {
  auto type = tensorType(v);
  if (type.getElementType() == elementType)
    return v;
  return create<CastOp>(type.clone(elementType), v);
}

llvm::Expected<Value> NodeContext::reshape(Value v, ArrayRef<int64_t> shape) {
  auto type = tensorType(v);
  if (type.getShape() == shape)
    return v;
  return create<ReshapeOp>(type.clone(shape), v);
}

} // namespace smp::onnx_frontend
