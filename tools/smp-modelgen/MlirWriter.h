//===- MlirWriter.h - The model as an smp dialect module --------*- C++ -*-===//

#ifndef SMP_TOOLS_MODELGEN_MLIRWRITER_H
#define SMP_TOOLS_MODELGEN_MLIRWRITER_H

#include "Models.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

namespace smp::modelgen {

/// Builds `func.func @main` as the ONNX importer would for the same model:
/// parameters are function arguments (`smp.param`, shapes only, no bytes),
/// the input `smp.input = "idx"`, the result `smp.output = "logits"`; ops
/// fold as the importer folds them (small constants only) and the module
/// goes through the importer's raising pipeline. The module carries
/// `smp.model` (the kind) and `smp.model_config` (the sizes), not
/// `smp.source`: there is no weights file.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildMlirModule(mlir::MLIRContext &ctx, const ModelConfig &config,
                bool fuseAttention = true);

} // namespace smp::modelgen

#endif // SMP_TOOLS_MODELGEN_MLIRWRITER_H
