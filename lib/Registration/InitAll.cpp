//===- InitAll.cpp - Register every smp dialect and pass ------------------===//

#include "smp/InitAll.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Transforms/Passes.h"
#include "smp/Dialect/Smp/IR/SmpDialect.h"
#include "smp/Dialect/Smp/OpModels/OpModels.h"
#include "smp/Dialect/Smp/Transforms/Passes.h"
#include "smp/Pipelines/Pipelines.h"

void smp::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<smp::SmpDialect, mlir::func::FuncDialect,
                  mlir::shard::ShardDialect>();
  smp::registerOpModels(registry);
}

void smp::registerAllPasses() {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  smp::registerSmpPasses();
  smp::registerPipelines();
}
