//===- Pipelines.cpp - Pass pipelines shared by smpc and smp-opt ----------===//

#include "smp/Pipelines/Pipelines.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"

void smp::buildRaisePipeline(mlir::OpPassManager &pm) {
  pm.addNestedPass<mlir::func::FuncOp>(createSmpRaiseNormsPass());
  pm.addNestedPass<mlir::func::FuncOp>(createSmpRaiseActivationsPass());
}

void smp::registerPipelines() {
  mlir::PassPipelineRegistration<>(
      "smp-raise",
      "Raise decomposed layer-norm, RMS-norm, GELU and SiLU chains to smp ops",
      buildRaisePipeline);
}
