//===- Diagnostics.h - smpc's one-line diagnostics --------------*- C++ -*-===//
//
// MLIR's default handler prints an error as `loc("...":0:0): error: ...`
// and smpc then added "cannot build the training step (see above)". smpc's
// handler prints each error of a pass, the importer or the MLIR parser as
// one line in smpc's own form, naming the model file and the ONNX node:
//
//   smpc: error: gpt.onnx: --freeze 'x' matches no trainable parameter
//   smpc: error: gpt.onnx: node '/h.0/attn/c_proj/MatMul': cannot split ...
//   smpc: error: model.mlir:3:5: custom op 'garbage' is unknown
//
// Notes follow on the same line; warnings print as "smpc: warning: ...".
//
//===----------------------------------------------------------------------===//

#ifndef SMPC_DIAGNOSTICS_H
#define SMPC_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"

#include <string>

/// "gpt.onnx", "gpt.onnx: node '/h.0/MatMul'", "m.mlir:3:5" or "".
std::string describeLocation(mlir::Location loc);

/// Prints every error and warning of `ctx` as one line while it lives, and
/// counts the errors (errorCount()).
class OneLineDiagnostics {
public:
  explicit OneLineDiagnostics(mlir::MLIRContext *ctx);
  /// Errors printed so far: a caller that fails after a pass or the parser
  /// printed one adds no "see above" line.
  static unsigned errorCount();

private:
  mlir::ScopedDiagnosticHandler handler;
};

#endif // SMPC_DIAGNOSTICS_H
