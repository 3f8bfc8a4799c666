//===- SharedInitializers.h - Parameters as the framework had them -*- C++ -*-===//
//
// Exporters change how parameters are shared: torch.onnx.export merges
// initializers with equal contents (every fresh LayerNorm weight becomes one
// tensor: TorchScript writes `b = Identity(a)`, the dynamo exporter reuses
// one name), and constant folding stores a tied weight's transpose as a
// separate copy. The importer undoes both before it reads the graph; see
// docs/bring-your-own-model.md for the rules.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_LIB_FRONTEND_ONNX_SHAREDINITIALIZERS_H
#define SMP_LIB_FRONTEND_ONNX_SHAREDINITIALIZERS_H

#include "smp/Frontend/ONNX/Importer.h"
#include "mlir/IR/BuiltinOps.h"
#include "onnx/onnx_pb.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace smp::onnx_frontend {

/// What the importer did to one initializer.
struct ParamOrigin {
  /// The parameter (untied) or the initializer (tied) it concerns.
  std::string name;
  /// The initializer of the file that holds its value.
  std::string from;
  /// "restored": a zero bias the dynamo exporter's optimiser removed, put
  /// back as a zero-initialised parameter (`uses`: the node input);
  /// "buffer": a float initializer holding infinities (an attention mask
  /// the exporter stored; no parameter holds them), kept frozen;
  /// "identity": an exporter's `name = Identity(from)` marker, untied;
  /// "merged": one of several nodes reading a constant-valued `from`,
  /// untied (a guess: warned about); "merged-exact": the same where the
  /// dynamo exporter's metadata names the PyTorch parameter (`name`) that
  /// the nodes read; "tied": a copy of `from` (transposed or equal), read as it.
  std::string kind;
  bool transposed = false;
  /// merged: the (node index, input index) in the file that read `from`
  /// and now read `name`.
  std::vector<std::pair<int, int>> uses;
};

/// Rewrites `model` in memory so that every parameter is as the framework
/// had it (the rules above, overridden by `options.tie`/`options.untie`);
/// returns what it changed and appends a warning for each guess.
llvm::Expected<std::vector<ParamOrigin>>
resolveSharedInitializers(onnx::ModelProto &model, llvm::StringRef path,
                          mlir::MLIRContext *ctx, const ImportOptions &options,
                          std::vector<std::string> &warnings);

/// Records `origins` on the imported module: `smp.init_from` on each untied
/// parameter and the `smp.param_origins` module attribute.
void recordParamOrigins(mlir::ModuleOp module,
                        const std::vector<ParamOrigin> &origins);

} // namespace smp::onnx_frontend

#endif // SMP_LIB_FRONTEND_ONNX_SHAREDINITIALIZERS_H
