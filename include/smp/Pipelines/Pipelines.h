//===- Pipelines.h - Pass pipelines shared by smpc and smp-opt --*- C++ -*-===//

#ifndef SMP_PIPELINES_PIPELINES_H
#define SMP_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"

namespace smp {

/// Raises the decomposed chains exporters write (layer norm, RMS norm, GELU,
/// SiLU) into smp ops. The ONNX importer runs it after conversion; smp-opt
/// exposes it as `smp-raise`.
void buildRaisePipeline(mlir::OpPassManager &pm);

/// Registers the pipelines above with the pass registry.
void registerPipelines();

} // namespace smp

#endif // SMP_PIPELINES_PIPELINES_H
