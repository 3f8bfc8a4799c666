//===- OpModels.h - What passes know about each smp op ----------*- C++ -*-===//
//
// Every smp op's gradient (AutodiffOpInterface), cost (CostOpInterface) and
// tensor-parallel sharding rule (TensorParallelOpInterface) are external
// models, one file per op family in lib/Dialect/Smp/OpModels (as upstream
// registers ShardingInterface models per dialect). docs/op-models.md says
// which file holds what and what adding an op takes.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_OPMODELS_OPMODELS_H
#define SMP_DIALECT_SMP_OPMODELS_OPMODELS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace smp {

/// Registers every op family's models (the functions below).
void registerOpModels(mlir::DialectRegistry &registry);

void registerElementwiseOpModels(mlir::DialectRegistry &registry);
void registerLinalgOpModels(mlir::DialectRegistry &registry);
void registerNormOpModels(mlir::DialectRegistry &registry);
void registerAttentionOpModels(mlir::DialectRegistry &registry);
void registerLossOpModels(mlir::DialectRegistry &registry);
void registerConvOpModels(mlir::DialectRegistry &registry);
void registerDataMovementOpModels(mlir::DialectRegistry &registry);
void registerGatherOpModels(mlir::DialectRegistry &registry);
void registerOptimizerOpModels(mlir::DialectRegistry &registry);
/// Pipeline and tensor-parallel communication, offloading, and the upstream
/// shard dialect's collectives.
void registerCommunicationOpModels(mlir::DialectRegistry &registry);

} // namespace smp

#endif // SMP_DIALECT_SMP_OPMODELS_OPMODELS_H
