// smp-recompute (lib/Dialect/Smp/Transforms/RecomputeActivations.cpp, over
// the policies of Recompute.cpp).
// RUN: smp-opt %s '--smp-build-gradients=loss=y' '--smp-recompute=recompute=selective' | FileCheck %s
// RUN: smp-opt %s --smp-pipeline-split=stages=2 '--smp-build-gradients=loss=y' '--smp-recompute=recompute=full recompute-stages=1' | FileCheck %s --check-prefix=STAGE
// RUN: not smp-opt %s '--smp-recompute=recompute=full' 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: not smp-opt %s '--smp-recompute=recompute=some' 2>&1 | FileCheck %s --check-prefix=BAD

// smp-recompute on the step smp-build-gradients built: the backward (ops
// marked smp.bwd) reads copies of the attention cores (scores and softmax),
// which are part of the backward (smp.bwd) and marked smp.recomputed so
// that CSE keeps them apart from the forward's.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[S:.*]] = smp.matmul %[[Q:.*]], %[[Q]] {transpose_rhs = true}
// CHECK: smp.matmul %{{.*}}, %{{.*}} {smp.bwd, smp.recomputed, transpose_rhs = true}
// CHECK-NEXT: smp.softmax %{{.*}} {axis = 1 : i64, smp.bwd, smp.recomputed}
// CHECK: smp.matmul %{{.*}}, %{{.*}} {smp.bwd, smp.recomputed, transpose_rhs = true}
// CHECK-NEXT: smp.softmax %{{.*}} {axis = 1 : i64, smp.bwd, smp.recomputed}

// With pipeline stages (the step unrolled, one micro-batch), only stage 1's
// forward is recomputed: the copies carry its stage and micro-batch.
// STAGE-LABEL: func.func @train_step
// STAGE-NOT: smp.recomputed{{.*}}smp.stage = 0
// STAGE: {smp.bwd, smp.mb = 0 : i64, smp.recomputed, smp.stage = 1 : i64
// STAGE-NOT: smp.recomputed{{.*}}smp.stage = 0

// NOSTEP: smp-recompute: no func @train_step (run smp-build-gradients first)
// BAD: unknown recompute mode 'some' (expected none, full, selective or gathers)
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
