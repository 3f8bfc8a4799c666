// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adamw dp=2 zero-stage=1})' | FileCheck %s --check-prefix=TWO
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adamw dp=2 zero-stage=1 bucket-mb=0})' | FileCheck %s --check-prefix=ONE

// Two parameters: their updated chunks (5 and 2 values) are all-gathered
// in one bucket, [7] -> [14], viewed as [2, 7] and split into each
// parameter's columns (one split, not a strided slice each), each
// flattened, unpadded and reshaped. With
// bucket-mb=0 (ONE) each is gathered alone.
// TWO-LABEL: func.func @train_step
// TWO: %[[NW:.*]], %{{.*}}, %{{.*}} = smp.adam_update
// TWO: %[[NB:.*]], %{{.*}}, %{{.*}} = smp.adam_update
// TWO: %[[CAT:.*]] = smp.concat %[[NW]], %[[NB]] {axis = 0 : i64} : (tensor<5xf32>, tensor<2xf32>) -> tensor<7xf32>
// TWO: %[[ALL:.*]] = shard.all_gather %[[CAT]] on @dp grid_axes = [0] gather_axis = 0 : tensor<7xf32> -> tensor<14xf32>
// TWO: %[[ROWS:.*]] = smp.reshape %[[ALL]] : tensor<14xf32> -> tensor<2x7xf32>
// TWO: %[[COLS:.*]]:2 = smp.split %[[ROWS]] {axis = 1 : i64, sizes = array<i64: 5, 2>} : tensor<2x7xf32> -> tensor<2x5xf32>, tensor<2x2xf32>
// TWO: %[[WF:.*]] = smp.reshape %[[COLS]]#0 : tensor<2x5xf32> -> tensor<10xf32>
// TWO: %[[WU:.*]] = smp.slice %[[WF]] {limits = array<i64: 9>
// TWO: %[[W:.*]] = smp.reshape %[[WU]] : tensor<9xf32> -> tensor<3x3xf32>
// TWO: %[[B:.*]] = smp.reshape %[[COLS]]#1 : tensor<2x2xf32> -> tensor<4xf32>
// TWO-NOT: shard.all_gather
// TWO: return %[[W]], %{{[a-z_0-9]+}}, %{{[a-z_0-9]+}}, %[[B]],
// ONE-LABEL: func.func @train_step
// ONE-COUNT-2: shard.all_gather
// ONE-NOT: shard.all_gather
// ONE: return
module {
  func.func @main(%x: tensor<1x3xf32> {smp.input = "x"},
                  %w: tensor<3x3xf32> {smp.param = "w"},
                  %b: tensor<4xf32> {smp.param = "b"})
      -> (tensor<f32> {smp.output = "y"}) {
    %0 = smp.matmul %x, %w {transpose_rhs = true} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<1x3xf32>
    %1 = smp.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<1x3xf32> -> tensor<f32>
    %2 = smp.reduce_sum %b {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
    %3 = smp.add %1, %2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %3 : tensor<f32>
  }
}
