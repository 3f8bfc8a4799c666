// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adamw dp=4 sharded-dp=2 zero-stage=1})' | FileCheck %s --check-prefix=Z1
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adamw dp=4 sharded-dp=2 zero-stage=2 clip-grad-norm=1.0})' | FileCheck %s --check-prefix=Z2
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adamw dp=4 sharded-dp=2 zero-stage=3})' | FileCheck %s --check-prefix=Z3
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adamw dp=4 sharded-dp=4 zero-stage=3})' | FileCheck %s --check-prefix=FLAT
// RUN: not smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y dp=4 sharded-dp=3 zero-stage=3})' 2>&1 | FileCheck %s --check-prefix=BAD

// Hybrid sharding: dp 4 as 2 replica groups of 2 ranks (shard.grid @dp is
// [2, 2]; dp rank r * 2 + s is shard s of group r). The 3x3 parameter (9
// elements, padded to 10) is chunked over the 2 ranks of a group: its
// optimizer states hold 5 elements, not 3.
//
// ZeRO-1: the gradient is reduce-scattered within the group (axis 1), the
// chunk all-reduced across the groups (axis 0), the parameter's chunk
// sliced and the new chunk gathered within the group (axis 1). The loss
// (and the cross-replica sums of build-gradients) span both axes.
// Z1: shard.grid @dp(shape = 2x2)
// Z1-LABEL: func.func @train_step
// Z1-SAME: tensor<5xf32> {smp.layout = #smp.layout<dp = chunk(of = [3, 3])>, smp.state = "w.exp_avg"}
// Z1: %[[GS:.*]] = shard.reduce_scatter %{{.*}} on @dp grid_axes = [1] scatter_axis = 0 : tensor<10xf32> -> tensor<5xf32>
// Z1: %[[GR:.*]] = shard.all_reduce %[[GS]] on @dp grid_axes = [0] : tensor<5xf32> -> tensor<5xf32>
// Z1: shard.all_reduce %{{.*}} on @dp grid_axes = [0, 1] : tensor<f32> -> tensor<f32>
// Z1: %[[PS:.*]] = shard.all_slice %{{.*}} on @dp grid_axes = [1] slice_axis = 0 : tensor<10xf32> -> tensor<5xf32>
// Z1: smp.adam_update %[[PS]], %[[GR]]
// Z1: shard.all_gather %{{.*}} on @dp grid_axes = [1] gather_axis = 0 : tensor<5xf32> -> tensor<10xf32>

// ZeRO-2: the same collectives; the gradient norm sums each rank's squares
// over its shard group only (the replica groups hold the same chunks).
// Z2: shard.grid @dp(shape = 2x2)
// Z2-LABEL: func.func @train_step
// Z2: %[[GS:.*]] = shard.reduce_scatter %{{.*}} on @dp grid_axes = [1] scatter_axis = 0 {{.*}}: tensor<10xf32> -> tensor<5xf32>
// Z2: %[[GR:.*]] = shard.all_reduce %[[GS]] on @dp grid_axes = [0] : tensor<5xf32> -> tensor<5xf32>
// Z2: %[[SQ:.*]] = smp.mul %[[GR]], %[[GR]]
// Z2: %[[SS:.*]] = smp.reduce_sum %[[SQ]]
// Z2: shard.all_reduce %[[SS]] on @dp grid_axes = [1] : tensor<f32> -> tensor<f32>

// ZeRO-3: the parameter is stored as its 5-element chunk of a group and
// gathered within the group (axis 1) before the forward (the backward of
// w x does not read w); the optimizer updates the chunk in place.
// Z3: shard.grid @dp(shape = 2x2)
// Z3-LABEL: func.func @train_step
// Z3-SAME: %arg1: tensor<5xf32> {smp.layout = #smp.layout<dp = chunk(of = [3, 3])>, smp.param = "w"}
// Z3: shard.all_gather %arg1 on @dp grid_axes = [1] gather_axis = 0 {smp.copy = 0 : i64} : tensor<5xf32> -> tensor<10xf32>
// Z3: %[[GS:.*]] = shard.reduce_scatter %{{.*}} on @dp grid_axes = [1] scatter_axis = 0 : tensor<10xf32> -> tensor<5xf32>
// Z3: %[[GR:.*]] = shard.all_reduce %[[GS]] on @dp grid_axes = [0] : tensor<5xf32> -> tensor<5xf32>
// Z3: smp.adam_update %arg1, %[[GR]]
// Z3-NOT: shard.all_gather

// A group of all 4 ranks is plain ZeRO-3: a 1-D grid, chunks of 3, no
// cross-group all-reduce of the gradient.
// FLAT: shard.grid @dp(shape = 4)
// FLAT-LABEL: func.func @train_step
// FLAT-SAME: %arg1: tensor<3xf32> {smp.layout = #smp.layout<dp = chunk(of = [3, 3])>, smp.param = "w"}
// FLAT: shard.reduce_scatter %{{.*}} on @dp grid_axes = [0] scatter_axis = 0 : tensor<12xf32> -> tensor<3xf32>
// FLAT-NOT: tensor<3xf32> -> tensor<3xf32>
// FLAT: smp.adam_update

// BAD: dp-shard 3 does not divide dp 4
func.func @main(%x: tensor<1x3xf32> {smp.input = "x"},
                %w: tensor<3x3xf32> {smp.param = "w"})
    -> (tensor<f32> {smp.output = "y"}) {
  %0 = smp.matmul %x, %w {transpose_rhs = true} : (tensor<1x3xf32>, tensor<3x3xf32>) -> tensor<1x3xf32>
  %1 = smp.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<1x3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
