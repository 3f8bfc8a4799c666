// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adamw dp=2 zero-stage=1})' | FileCheck %s

// ZeRO-1 over 2 ranks for a 3x3 parameter (9 elements, padded to 10): the
// flattened gradient is reduce-scattered, the optimizer states hold 5
// elements, this rank's slice of the parameter is updated, and the
// parameter is all-gathered, unpadded and reshaped.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<5xf32> {smp.layout = #smp.layout<dp = chunk(of = [3, 3])>, smp.state = "w.exp_avg"}
// CHECK-SAME: tensor<5xf32> {smp.layout = #smp.layout<dp = chunk(of = [3, 3])>, smp.state = "w.exp_avg_sq"}
// CHECK: %[[GF:.*]] = smp.reshape %{{.*}} : tensor<3x3xf32> -> tensor<9xf32>
// CHECK: %[[GP:.*]] = smp.concat %[[GF]], %{{.*}} {axis = 0 : i64} : (tensor<9xf32>, tensor<1xf32>) -> tensor<10xf32>
// CHECK: %[[GS:.*]] = shard.reduce_scatter %[[GP]] on @dp grid_axes = [0] scatter_axis = 0 : tensor<10xf32> -> tensor<5xf32>
// CHECK: %[[PS:.*]] = shard.all_slice %{{.*}} on @dp grid_axes = [0] slice_axis = 0 : tensor<10xf32> -> tensor<5xf32>
// CHECK: %[[NEW:.*]], %{{.*}}, %{{.*}} = smp.adam_update %[[PS]], %[[GS]]
// CHECK: %[[ALL:.*]] = shard.all_gather %[[NEW]] on @dp grid_axes = [0] gather_axis = 0 : tensor<5xf32> -> tensor<10xf32>
// CHECK: %[[CUT:.*]] = smp.slice %[[ALL]] {limits = array<i64: 9>, starts = array<i64: 0>, steps = array<i64: 1>}
// CHECK: %[[P:.*]] = smp.reshape %[[CUT]] : tensor<9xf32> -> tensor<3x3xf32>
// CHECK: return %[[P]],
func.func @main(%x: tensor<1x3xf32> {smp.input = "x"},
                %w: tensor<3x3xf32> {smp.param = "w"})
    -> (tensor<f32> {smp.output = "y"}) {
  %0 = smp.matmul %x, %w {transpose_rhs = true} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<1x3xf32>
  %1 = smp.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<1x3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
