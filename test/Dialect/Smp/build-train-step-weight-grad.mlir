// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(smp-build-train-step{loss=mse:y:target optimizer=sgd})' | FileCheck %s

// The gradient of a weight matrix applied to a batch of activations is one
// product over the flattened rows ([2*3, 4]^T [2*3, 5]), not a batched
// product [2, 4, 5] summed over the batch.
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: %[[X2:.*]] = smp.reshape %{{.*}} : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-DAG: %[[G2:.*]] = smp.reshape %{{.*}} : tensor<2x3x5xf32> -> tensor<6x5xf32>
// CHECK: smp.matmul %[[X2]], %[[G2]] {transpose_lhs = true} : (tensor<6x4xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
// CHECK-NOT: tensor<2x4x5xf32>
// CHECK: smp.sgd_update
func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"},
                %w: tensor<4x5xf32> {smp.param = "w"})
    -> (tensor<2x3x5xf32> {smp.output = "y"}) {
  %0 = smp.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// The same for an nn.Linear weight [out, in] (transposed operand): the
// gradient comes out in the weight's layout.
// CHECK-LABEL: func.func @train_step
// CHECK: smp.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
// CHECK-NOT: tensor<2x5x4xf32>
// CHECK: smp.sgd_update
func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"},
                %w: tensor<5x4xf32> {smp.param = "w"})
    -> (tensor<2x3x5xf32> {smp.output = "y"}) {
  %0 = smp.matmul %x, %w {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}
