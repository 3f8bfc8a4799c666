// RUN: smp-opt %s -split-input-file --smp-gradient-all-reduce | FileCheck %s
// RUN: smp-opt %s -split-input-file '--smp-gradient-all-reduce=bucket-mb=0' | FileCheck %s --check-prefix=NONE

// smp-gradient-all-reduce on a step as smp-build-gradients hands it on: the
// gradients (smp.grad_of) in one bucket (flattened, concatenated, one
// all-reduce over @dp, split back), then the loss.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G1:.*]] = smp.mul %arg1, %arg2
// CHECK: %[[G2:.*]] = smp.mul %arg2, %arg2
// CHECK: %[[F1:.*]] = smp.reshape %[[G1]] : tensor<2x3xf32> -> tensor<6xf32>
// CHECK: %[[F2:.*]] = smp.reshape %[[G2]] : tensor<3xf32> -> tensor<3xf32>
// CHECK: %[[CAT:.*]] = smp.concat %[[F1]], %[[F2]]
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[CAT]] on @dp grid_axes = [0] : tensor<9xf32> -> tensor<9xf32>
// CHECK: %[[S1:.*]] = smp.slice %[[SUM]] {limits = array<i64: 6>, smp.view, starts = array<i64: 0>
// CHECK: %[[R1:.*]] = smp.reshape %[[S1]] : tensor<6xf32> -> tensor<2x3xf32>
// CHECK: %[[S2:.*]] = smp.slice %[[SUM]] {limits = array<i64: 9>, smp.view, starts = array<i64: 6>
// CHECK: %[[R2:.*]] = smp.reshape %[[S2]] : tensor<3xf32> -> tensor<3xf32>
// CHECK: %[[LOSS:.*]] = shard.all_reduce %arg0 on @dp
// CHECK: return %[[R1]], %[[R2]], %[[LOSS]]
// One all-reduce per gradient with bucket-mb=0.
// NONE-LABEL: func.func @train_step
// NONE: shard.all_reduce %{{.*}} on @dp grid_axes = [0] : tensor<2x3xf32>
// NONE: shard.all_reduce %{{.*}} on @dp grid_axes = [0] : tensor<3xf32>
// NONE: shard.all_reduce %arg0 on @dp grid_axes = [0] : tensor<f32>
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%loss: tensor<f32>, %w: tensor<2x3xf32> {smp.param = "w"},
                        %b: tensor<3xf32> {smp.param = "b"})
      -> (tensor<2x3xf32> {smp.grad_of = 1 : i64}, tensor<3xf32> {smp.grad_of = 2 : i64},
          tensor<f32> {smp.output = "loss"}) {
    %0 = smp.mul %w, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %1 = smp.mul %b, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return %0, %1, %loss : tensor<2x3xf32>, tensor<3xf32>, tensor<f32>
  }
}

// -----

// One replica (no grid @dp): nothing to sum.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: shard.all_reduce
// CHECK: return %arg1, %arg0
func.func @train_step(%loss: tensor<f32>, %w: tensor<3xf32> {smp.param = "w"})
    -> (tensor<3xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"}) {
  return %w, %loss : tensor<3xf32>, tensor<f32>
}
