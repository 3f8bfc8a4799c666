// smp-recompute{recompute=gathers} (Recompute.cpp's rowGathers), after
// smp-sequence-parallel: two MLP blocks over tp 2, the second entered
// through an all_gather of the residual's rows. The backward's weight
// gradient of the second block's column-parallel product reads its own
// all_gather of the rows (and tp_copy view), marked smp.bwd and
// smp.recomputed, so the forward's whole value dies after its forward use;
// the backward's other collectives are untouched.
// RUN: smp-opt %s --smp-tensor-parallel=tp=2 --smp-sequence-parallel '--smp-build-gradients=loss=y' '--smp-recompute=recompute=gathers' | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK: %[[G:.*]] = shard.all_gather %[[ROWS:.*]] on @tp grid_axes = [0] gather_axis = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK: %[[C:.*]] = smp.tp_copy %[[G]] : tensor<4x8xf32>
// CHECK: smp.matmul %[[C]], %arg3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NOT: %[[C]]
// CHECK: %[[G2:.*]] = shard.all_gather %[[ROWS]] on @tp grid_axes = [0] gather_axis = 0 {smp.bwd, smp.recomputed} : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[C2:.*]] = smp.tp_copy %[[G2]] {smp.bwd, smp.recomputed} : tensor<4x8xf32>
// CHECK-NEXT: smp.matmul %[[C2]], %{{.*}} {smp.bwd, transpose_lhs = true} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK-NOT: %[[C]]
// CHECK: return
module {
  func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                  %w1: tensor<8x16xf32> {smp.param = "fc1"},
                  %w2: tensor<16x8xf32> {smp.param = "fc2"},
                  %w3: tensor<8x16xf32> {smp.param = "fc3"},
                  %w4: tensor<16x8xf32> {smp.param = "fc4"})
      -> (tensor<f32> {smp.output = "y"}) {
    %h = smp.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %a = smp.relu %h : tensor<4x16xf32>
    %o = smp.matmul %a, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %r = smp.add %o, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %h2 = smp.matmul %r, %w3 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %a2 = smp.relu %h2 : tensor<4x16xf32>
    %o2 = smp.matmul %a2, %w4 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %r2 = smp.add %o2, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %s = smp.reduce_sum %r2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
