//===- OpModels.cpp - Register every op family's models -------------------===//

#include "smp/Dialect/Smp/OpModels/OpModels.h"

#include "mlir/IR/DialectRegistry.h"

void smp::registerOpModels(mlir::DialectRegistry &registry) {
  registerElementwiseOpModels(registry);
  registerLinalgOpModels(registry);
  registerNormOpModels(registry);
  registerAttentionOpModels(registry);
  registerLossOpModels(registry);
  registerConvOpModels(registry);
  registerDataMovementOpModels(registry);
  registerGatherOpModels(registry);
  registerOptimizerOpModels(registry);
  registerCommunicationOpModels(registry);
}
