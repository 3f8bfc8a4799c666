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
};

/// Imports an ONNX model (binary `.onnx`, or ONNX text syntax when the file
/// name ends in `.onnxtxt`) into a module holding one `func.func @main`.
/// Errors are one line and name the file, node and tensor involved.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importONNXFile(mlir::MLIRContext &context, llvm::StringRef path,
               const ImportOptions &options);

/// ONNX op types (default domain) the importer converts, sorted.
std::vector<std::string> supportedOps();

/// Lists the op types of the model at `path` that the importer does not
/// support (empty when all are supported). Fails if the file does not parse.
llvm::Expected<std::vector<std::string>>
unsupportedOpsIn(llvm::StringRef path);

} // namespace smp::onnx_frontend

#endif // SMP_FRONTEND_ONNX_IMPORTER_H
