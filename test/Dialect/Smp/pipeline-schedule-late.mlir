// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adamw dp=2 zero-stage=1 microbatches=2},smp-pipeline-schedule{pp=1})' | FileCheck %s
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adamw dp=2 zero-stage=2 microbatches=2},smp-pipeline-schedule{pp=1})' | FileCheck %s

// ZeRO-1 and ZeRO-2 with two micro-batches: the optimizer updates this
// rank's chunk of each parameter, sliced from the parameter (flattened, w's
// 9 values padded to 10). The slice reads the parameter alone, so it is a
// free op, which ran before the micro-batches: each chunk was held through
// the whole step (1/dp of the parameters; 6.5% of an 8-layer GPT's arena at
// dp4). It runs with the epilogue now, after the last backward op, right
// before the update that reads it.
// CHECK-LABEL: func.func @train_step_pp0(
// CHECK-SAME: %[[W:[^:]*]]: tensor<3x3xf32> {smp.param = "w"
// CHECK-NOT: shard.all_slice
// CHECK: shard.reduce_scatter
// CHECK-NOT: shard.all_slice
// CHECK: smp.sqrt
// CHECK: %[[FLAT:.*]] = smp.reshape %[[W]] : tensor<3x3xf32> -> tensor<9xf32>
// CHECK-NEXT: %[[ZERO:.*]] = smp.constant dense<0.000000e+00> : tensor<1xf32>
// CHECK-NEXT: %[[PAD:.*]] = smp.concat %[[FLAT]], %[[ZERO]] {axis = 0 : i64} : (tensor<9xf32>, tensor<1xf32>) -> tensor<10xf32>
// CHECK-NEXT: %[[MINE:.*]] = shard.all_slice %[[PAD]] on @dp
// CHECK-NEXT: smp.adam_update %[[MINE]],
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"},
                  %w: tensor<3x3xf32> {smp.param = "w"},
                  %b: tensor<4xf32> {smp.param = "b"})
      -> (tensor<f32> {smp.output = "y"}) {
    %0 = smp.matmul %x, %w {transpose_rhs = true} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %1 = smp.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    %2 = smp.reduce_sum %b {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
    %3 = smp.add %1, %2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}
