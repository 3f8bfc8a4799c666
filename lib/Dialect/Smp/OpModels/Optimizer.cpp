//===- Optimizer.cpp - Op models of the optimizer updates -----------------===//
//
// sgd_update, adam_update and their multi-tensor forms: costs (they run after
// the backward: no gradient, no sharding rule).
//
//===----------------------------------------------------------------------===//

#include "OpModelSupport.h"

using namespace mlir;

namespace smp {

void registerOptimizerOpModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, SmpDialect *) {
    attach<CostFn<streamingCost<3>>::Model, SgdUpdateOp, SgdUpdateMultiOp>(ctx);
    attach<CostFn<streamingCost<5>>::Model, AdamUpdateOp, AdamUpdateMultiOp>(
        ctx);
  });
}

} // namespace smp
