//===- NodeContext.h - What an ONNX op converter sees -----------*- C++ -*-===//
//
// Each ONNX op type has one converter function, registered by op family
// (Convert*.cpp). A converter reads the node through NodeContext and creates
// smp ops with `create`, which infers result types, verifies the op and
// folds it when its operands are constants, turning every failure into an
// error that names the node.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_FRONTEND_ONNX_NODECONTEXT_H
#define SMP_LIB_FRONTEND_ONNX_NODECONTEXT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <string>

namespace smp::onnx_frontend {

class GraphImporter;

class NodeContext {
public:
  NodeContext(GraphImporter &importer, const onnx::NodeProto &node,
              int nodeIndex, mlir::Location loc);

  const onnx::NodeProto &node() const { return node_; }
  mlir::OpBuilder &builder();
  mlir::MLIRContext *context();
  mlir::Location loc() const { return loc_; }
  int64_t opset() const;
  /// The directory of the model file: external data of tensor attributes
  /// (Constant's `value`) is resolved under it, as for initializers.
  llvm::StringRef modelDir() const;
  /// Whether the model is imported to be trained (smpc compile --train).
  bool training() const;
  /// --no-dropout: training-mode Dropout nodes are identities.
  bool noDropout() const;
  /// False under --no-fuse-attention (attention chains kept as imported).
  bool fuseAttention() const;
  /// Whether this node is an Identity whose output PyTorch detaches.
  bool stopsGradient() const;
  /// A warning naming this node, given once per import for each `key`
  /// ("N more nodes" are not listed).
  void warnOnce(llvm::StringRef key, const llvm::Twine &msg);
  /// Counts a random Dropout that --no-dropout made the identity.
  void noteDroppedDropout();
  /// The stream of the next random Dropout (0, 1, ... in import order):
  /// which of the model's dropouts an smp.dropout is.
  int64_t nextDropoutStream();
  /// The padding row (nn.Embedding padding_idx) the smp.export sidecar
  /// gives initializer `name`, or -1.
  int64_t paddingRow(llvm::StringRef name);

  //===--- Inputs ----------------------------------------------------------===//
  /// Number of inputs as written (omitted optional ones count).
  unsigned numInputs() const { return node_.input_size(); }
  bool hasInput(unsigned i) const {
    return i < numInputs() && !node_.input(i).empty();
  }
  /// A required input.
  llvm::Expected<mlir::Value> input(unsigned i);
  /// An optional input; a null Value when omitted.
  llvm::Expected<mlir::Value> optionalInput(unsigned i);
  /// The value of input `i` if it is a compile-time constant.
  mlir::DenseElementsAttr constantInput(unsigned i);
  /// Integer values of constant input `i`; an error naming `what` otherwise.
  llvm::Expected<llvm::SmallVector<int64_t>> constantInts(unsigned i,
                                                          llvm::StringRef what);
  /// The one integer of constant input `i` (a scalar or one element); an
  /// error naming `what` otherwise.
  llvm::Expected<int64_t> constantInt(unsigned i, llvm::StringRef what);
  /// Scalar value of constant input `i` (any numeric type).
  llvm::Expected<double> constantScalar(unsigned i, llvm::StringRef what);
  /// Float values of constant input `i`; empty when the input is absent.
  llvm::Expected<llvm::SmallVector<double>>
  constantFloats(unsigned i, llvm::StringRef what);

  //===--- Attributes ------------------------------------------------------===//
  const onnx::AttributeProto *attr(llvm::StringRef name) const;
  bool hasAttr(llvm::StringRef name) const { return attr(name) != nullptr; }
  int64_t attrInt(llvm::StringRef name, int64_t def) const;
  float attrFloat(llvm::StringRef name, float def) const;
  std::string attrString(llvm::StringRef name, llvm::StringRef def) const;
  llvm::SmallVector<int64_t> attrInts(llvm::StringRef name) const;
  /// Attribute `axis` (default `def`) as a dim of a rank-`rank` tensor;
  /// the error "axis A out of range" when it is not one.
  llvm::Expected<int64_t> attrAxis(int64_t def, int64_t rank) const;

  //===--- Outputs ---------------------------------------------------------===//
  unsigned numOutputs() const { return node_.output_size(); }
  bool hasOutput(unsigned i) const {
    return i < numOutputs() && !node_.output(i).empty();
  }
  void setOutput(unsigned i, mlir::Value v);
  /// Sets output `i` from a converter step, or forwards its error.
  llvm::Error output(llvm::Expected<mlir::Value> v, unsigned i = 0) {
    if (!v)
      return v.takeError();
    setOutput(i, *v);
    return llvm::Error::success();
  }
  /// Input `i` as a sequence (its tensors), and output `i` defined as one.
  llvm::Expected<llvm::ArrayRef<mlir::Value>> sequenceInput(unsigned i);
  void setSequenceOutput(unsigned i, llvm::ArrayRef<mlir::Value> values);
  /// Required inputs [0, count).
  llvm::Expected<llvm::SmallVector<mlir::Value>> inputs(unsigned count);

  //===--- Building ops ----------------------------------------------------===//
  /// Creates `OpTy` with the given builder arguments. Pass `placeholder()` as
  /// result type for ops that infer it. The op is then type-inferred,
  /// verified and folded; failures become errors naming this node.
  template <typename OpTy, typename... Args>
  llvm::Expected<mlir::Value> create(Args &&...args) {
    auto op = OpTy::create(builder(), loc_, std::forward<Args>(args)...);
    auto results = finish(op.getOperation());
    if (!results)
      return results.takeError();
    return results->front();
  }
  /// Like create, for ops with several results.
  template <typename OpTy, typename... Args>
  llvm::Expected<llvm::SmallVector<mlir::Value>> createMulti(Args &&...args) {
    auto op = OpTy::create(builder(), loc_, std::forward<Args>(args)...);
    return finish(op.getOperation());
  }
  mlir::Type placeholder();
  llvm::Expected<llvm::SmallVector<mlir::Value>> finish(mlir::Operation *op);

  /// A constant of the given shape and element type filled with `value`.
  mlir::Value splat(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                    double value);
  /// The same filled at run time: a one-element constant expanded, so the
  /// artifact stores no bytes for it (zeros of an output's shape, a
  /// normaliser's unit scale).
  mlir::Value filled(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                     double value);
  /// A constant of the given shape and element type (float, integer or
  /// bool) holding `values`, row-major.
  mlir::Value constantOf(mlir::Type elementType, llvm::ArrayRef<int64_t> shape,
                         llvm::ArrayRef<double> values);
  /// A rank-0 constant of `like`'s element type.
  mlir::Value scalarLike(mlir::Value like, double value);
  /// Casts `v` to `elementType` if it differs.
  llvm::Expected<mlir::Value> castTo(mlir::Value v, mlir::Type elementType);
  /// Reshapes `v` to `shape`.
  llvm::Expected<mlir::Value> reshape(mlir::Value v,
                                      llvm::ArrayRef<int64_t> shape);

  /// An error "<file>: node 'n' (Op): msg".
  llvm::Error error(const llvm::Twine &msg) const;

private:
  GraphImporter &importer_;
  const onnx::NodeProto &node_;
  int nodeIndex_;
  mlir::Location loc_;
};

using Converter = std::function<llvm::Error(NodeContext &)>;
using ConverterTable = llvm::StringMap<Converter>;

void registerElementwiseConverters(ConverterTable &table);
void registerActivationConverters(ConverterTable &table);
void registerPadConverters(ConverterTable &table);
void registerInstanceNormConverters(ConverterTable &table);
void registerResizeConverters(ConverterTable &table);
void registerRecurrentConverters(ConverterTable &table);
void registerEinsumConverters(ConverterTable &table);
void registerMatMulConverters(ConverterTable &table);
void registerReduceConverters(ConverterTable &table);
void registerShapeConverters(ConverterTable &table);
void registerNNConverters(ConverterTable &table);
void registerGatherIndexedConverters(ConverterTable &table);
void registerSequenceConverters(ConverterTable &table);
void registerAttentionConverters(ConverterTable &table);

/// The table of all converters (built once).
const ConverterTable &converters();

/// Helpers shared by converters.
mlir::RankedTensorType tensorType(mlir::Value v);
llvm::SmallVector<int64_t> shapeOf(mlir::Value v);

} // namespace smp::onnx_frontend

#endif // SMP_LIB_FRONTEND_ONNX_NODECONTEXT_H
