// RUN: smp-opt %s '--smp-build-gradients=loss=y' '--smp-recompute=recompute=full' '--smp-offload-activations=offload-min-bytes=64' | FileCheck %s
// RUN: smp-opt %s '--smp-build-gradients=loss=y' '--smp-offload-activations=offload-min-bytes=1000000' | FileCheck %s --check-prefix=BIG

// smp-offload-activations after smp-recompute: only the checkpoints that
// the backward still reads go to host memory after their last forward use
// (smp.offload, part of the forward) and come back before the backward
// needs them (smp.prefetch, part of the backward: smp.bwd); the backward
// reads the prefetched copies.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[E:.*]] = smp.mul %arg0, %arg3
// CHECK: %[[OFF:.*]] = smp.offload %[[E]] : tensor<4x8xf32>
// CHECK: %[[BACK:.*]] = smp.prefetch %[[OFF]] {smp.bwd} : tensor<4x8xf32>
// CHECK: smp.matmul %[[BACK]], %arg1 {smp.bwd, smp.recomputed}
// Activations under offload-min-bytes stay in device memory.
// BIG-LABEL: func.func @train_step
// BIG-NOT: smp.offload
// BIG-NOT: smp.prefetch
module {
  func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                  %w1: tensor<8x8xf32> {smp.param = "w1"},
                  %w2: tensor<8x8xf32> {smp.param = "w2"},
                  %g: tensor<8xf32> {smp.param = "g"})
      -> (tensor<f32> {smp.output = "y"}) {
    %e = smp.mul %x, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %q1 = smp.matmul %e, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %s1 = smp.matmul %q1, %q1 {transpose_rhs = true} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
    %p1 = smp.softmax %s1 {axis = 1 : i64} : tensor<4x4xf32>
    %a1 = smp.matmul %p1, %q1 : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %t1 = smp.tanh %a1 : tensor<4x8xf32>
    %h1 = smp.add %e, %t1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %q2 = smp.matmul %h1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %s2 = smp.matmul %q2, %q2 {transpose_rhs = true} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
    %p2 = smp.softmax %s2 {axis = 1 : i64} : tensor<4x4xf32>
    %a2 = smp.matmul %p2, %q2 : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %t2 = smp.tanh %a2 : tensor<4x8xf32>
    %h2 = smp.add %h1, %t2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = smp.reduce_sum %h2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
    return %y : tensor<f32>
  }
}
