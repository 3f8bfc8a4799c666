//===- Importer.h - ONNX ModelProto -> smp dialect --------------*- C++ -*-===//
//
// Public entry points of the ONNX frontend. The header is free of ONNX and
// protobuf types so that tools and tests include it cheaply.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_FRONTEND_ONNX_IMPORTER_H
#define SMP_FRONTEND_ONNX_IMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "smp/Target/Artifact/WeightSource.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace smp::onnx_frontend {

struct ImportOptions {
  /// Values for symbolic dims (`dim_param`), from `--dim name=value`.
  llvm::StringMap<int64_t> dims;
  /// Run the raising passes (layer norm, GELU, ...) after import.
  bool raise = true;
  /// If positive, the value of a symbolic leading (batch) dim of any input
  /// that `dims` does not bind.
  int64_t batchSize = 0;
  /// Graph inputs to fold in as constants: name -> a serialized ONNX
  /// TensorProto with the value (e.g. shapes and axes that ONNX test data
  /// feeds as inputs; smp compiles static shapes).
  llvm::StringMap<std::string> constantInputs;
};

/// A tensor read from an ONNX TensorProto file (`input_0.pb`).
struct HostTensor {
  std::string name;
  int32_t onnxType = 0;
  std::vector<int64_t> dims;
  std::string bytes; // little endian, row major
  std::string serialized; // the TensorProto as read
};

/// Names of the graph inputs of the model at `path` that are not
/// initializers, in order.
llvm::Expected<std::vector<std::string>> graphInputNames(llvm::StringRef path);

/// Reads and checks a serialized TensorProto file.
llvm::Expected<HostTensor> readTensorProtoFile(llvm::StringRef path);

/// Imports an ONNX model (binary `.onnx`, or ONNX text syntax when the file
/// name ends in `.onnxtxt`) into a module holding one `func.func @main`.
/// Errors are one line and name the file, node and tensor involved.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importONNXFile(mlir::MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options);

/// Opens the initializers of the ONNX model at `path` as a weight source.
llvm::Expected<std::unique_ptr<WeightSource>>
openONNXWeights(llvm::StringRef path);

/// ONNX op types (default domain) the importer converts, sorted.
std::vector<std::string> supportedOps();

/// Lists the op types of the model at `path` that the importer does not
/// support (empty when all are supported). Fails if the file does not parse.
llvm::Expected<std::vector<std::string>>
unsupportedOpsIn(llvm::StringRef path);

} // namespace smp::onnx_frontend

#endif // SMP_FRONTEND_ONNX_IMPORTER_H
