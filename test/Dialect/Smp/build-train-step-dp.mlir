// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=cross_entropy:logits:labels optimizer=sgd dp=4})' | FileCheck %s

// Data parallel over 4 ranks: the grid, each rank's share of the global
// mean cross-entropy (its sum over the global count of labels that are not
// ignored), gradients summed over the ranks, and the global loss reported.
// CHECK: shard.grid @dp(shape = 4)
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[Y:[^:]*]]: tensor<2xi64> {smp.input = "labels"}
// CHECK: %[[SUM:.*]] = smp.cross_entropy %{{.*}}, %[[Y]] {reduction = #smp<reduction sum>}
// CHECK: %[[IGN:.*]] = smp.constant dense<-100> : tensor<i64>
// CHECK: %[[IS:.*]] = smp.equal %[[Y]], %[[IGN]]
// CHECK: %[[KEEP:.*]] = smp.not %[[IS]]
// CHECK: %[[KF:.*]] = smp.cast %[[KEEP]] : tensor<2xi1> to tensor<2xf32>
// CHECK: %[[CNT:.*]] = smp.reduce_sum %[[KF]]
// CHECK: %[[TOTAL:.*]] = shard.all_reduce %[[CNT]] on @dp grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: %[[SHARE:.*]] = smp.div %[[SUM]], %[[TOTAL]]
// CHECK: %[[GW:.*]] = shard.all_reduce %{{.*}} on @dp grid_axes = [0] : tensor<3x5xf32> -> tensor<3x5xf32>
// CHECK: %[[LOSS:.*]] = shard.all_reduce %[[SHARE]] on @dp grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: smp.sgd_update %{{.*}}, %[[GW]]
// CHECK: return {{.*}}, %[[LOSS]], %{{.*}} :
func.func @main(%x: tensor<2x3xf32> {smp.input = "x"},
                %w: tensor<3x5xf32> {smp.param = "w"})
    -> (tensor<2x5xf32> {smp.output = "logits"}) {
  %0 = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}
