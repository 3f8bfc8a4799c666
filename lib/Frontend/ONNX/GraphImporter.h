//===- GraphImporter.h - Converts one validated ONNX graph ------*- C++ -*-===//

#ifndef SMP_LIB_FRONTEND_ONNX_GRAPHIMPORTER_H
#define SMP_LIB_FRONTEND_ONNX_GRAPHIMPORTER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "onnx/onnx_pb.h"
#include "smp/Frontend/ONNX/Importer.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace smp::onnx_frontend {

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &ctx, llvm::StringRef path,
                const ImportOptions &options, const onnx::ModelProto &model,
                int64_t opset);

  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> run();

  // State shared with NodeContext.
  mlir::MLIRContext &ctx;
  mlir::OpBuilder builder;
  std::string path;
  std::string modelDir;
  int64_t opset;
  /// The most recent error diagnostic emitted while building an op.
  std::string lastDiagnostic;
  /// Whether the model is imported to be trained.
  bool training() const { return options.training; }
  bool noDropout() const { return options.noDropout; }
  bool fuseAttention() const { return options.fuseAttention; }
  /// Whether node `name` is an Identity whose output PyTorch detaches.
  bool stopsGradient(llvm::StringRef name) const {
    return options.stopGradientNodes.contains(name);
  }
  /// Warnings given once per import (keys).
  llvm::StringSet<> warned;
  /// Random Dropout nodes --no-dropout made identities.
  int droppedDropouts = 0;
  int64_t dropouts = 0; // smp.dropout ops made (their streams)
  /// The padding row ImportOptions::paddingRows gives the initializer
  /// `name`, or -1; a row returned is marked as applied.
  int64_t takePaddingRow(llvm::StringRef name);

  /// The value of tensor `name`; an error if a converter did not produce it.
  llvm::Expected<mlir::Value> lookup(llvm::StringRef name) const;
  void define(llvm::StringRef name, mlir::Value v) { values[name] = v; }
  /// The tensors of sequence `name` (SplitToSequence, SequenceConstruct);
  /// an error if no converter made one by that name.
  llvm::Expected<llvm::ArrayRef<mlir::Value>>
  lookupSequence(llvm::StringRef name) const;
  void defineSequence(llvm::StringRef name, llvm::ArrayRef<mlir::Value> vs) {
    sequences[name].assign(vs.begin(), vs.end());
  }
  llvm::Error error(const llvm::Twine &msg) const;
  /// An error naming `what` when a tensor of `type` is over kMaxTensorBytes
  /// (smp/Support/CheckedMath.h) or its byte size overflows.
  llvm::Error checkTensorSize(mlir::RankedTensorType type,
                              const llvm::Twine &what) const;

private:
  /// Adds @main's arguments to `body`: the graph inputs (or the values
  /// given for them), then the used initializers (parameters, or constants
  /// when small), with their types and attributes.
  llvm::Error
  declareArguments(mlir::Block *body, mlir::Location loc,
                   llvm::SmallVectorImpl<mlir::Type> &argTypes,
                   llvm::SmallVectorImpl<mlir::DictionaryAttr> &argAttrs);
  /// Converts the graph's nodes in `order`; notes outputs not produced.
  llvm::Error convertNodes(llvm::ArrayRef<int> order, mlir::Location loc);
  /// An error for a --padding-row that no Gather kept.
  llvm::Error checkPaddingApplied() const;
  /// An error where graph output `out` declares a static shape or element
  /// type that differs from the computed `type`.
  llvm::Error checkDeclaredOutput(const onnx::ValueInfoProto &out,
                                  mlir::RankedTensorType type) const;
  llvm::Expected<mlir::RankedTensorType>
  valueInfoType(const onnx::ValueInfoProto &info, llvm::StringRef what);
  llvm::Error checkSupported() const;
  /// Binds the symbolic dims of the graph inputs (`boundDims`) from the
  /// user's --dim bindings and the batch, and refuses every disagreement
  /// between them and the file: see docs/bring-your-own-model.md.
  llvm::Error bindDims();

  const ImportOptions &options;
  /// Symbolic dim -> its value in this import.
  llvm::StringMap<int64_t> boundDims;
  const onnx::ModelProto &model;
  llvm::StringMap<mlir::Value> values;
  /// ONNX sequences, as their tensors: every one is made at import from
  /// tensors (a split) and read at constant positions, so none is a value.
  llvm::StringMap<llvm::SmallVector<mlir::Value>> sequences;
  llvm::StringMap<std::string> unavailable;
  llvm::StringSet<> paddingApplied;
};

} // namespace smp::onnx_frontend

#endif // SMP_LIB_FRONTEND_ONNX_GRAPHIMPORTER_H
