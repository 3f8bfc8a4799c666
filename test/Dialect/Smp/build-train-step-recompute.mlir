// RUN: smp-opt %s '--smp-build-train-step=loss=y recompute=full' | FileCheck %s --check-prefix=FULL
// RUN: smp-opt %s '--smp-build-train-step=loss=y recompute=selective' | FileCheck %s --check-prefix=SEL
// RUN: smp-opt %s '--smp-build-train-step=loss=y' | FileCheck %s --check-prefix=NONE
// RUN: not smp-opt %s '--smp-build-train-step=loss=y recompute=some' 2>&1 | FileCheck %s --check-prefix=BAD

// Two residual blocks with a tiny attention core each. Full recomputation:
// the backward of each block reads copies of the block's forward ops made
// from the block's input (the residual stream), not the forward's values.
// FULL-LABEL: func.func @train_step
// The forward:
// FULL: %[[E:.*]] = smp.mul %arg0, %arg3
// FULL: %[[H1:.*]] = smp.add %[[E]], %{{.*}}
// FULL: smp.add %[[H1]], %{{.*}}
// The second block, recomputed from h1 before its backward.
// FULL: smp.matmul %[[H1]], %arg2 {smp.recomputed}
// FULL: smp.softmax {{.*}} {axis = 1 : i64, smp.recomputed}
// The first block, recomputed from the embedding.
// FULL: smp.matmul %[[E]], %arg1 {smp.recomputed}
// FULL: smp.softmax {{.*}} {axis = 1 : i64, smp.recomputed}
// FULL: return

// Selective: only the attention cores (scores, softmax) are recomputed.
// SEL-LABEL: func.func @train_step
// SEL-NOT: smp.tanh {{.*}}smp.recomputed
// SEL: smp.matmul %{{.*}}, %{{.*}} {smp.recomputed, transpose_rhs = true}
// SEL-NEXT: smp.softmax {{.*}} {axis = 1 : i64, smp.recomputed}
// SEL: smp.matmul %{{.*}}, %{{.*}} {smp.recomputed, transpose_rhs = true}
// SEL-NEXT: smp.softmax {{.*}} {axis = 1 : i64, smp.recomputed}

// NONE-NOT: smp.recomputed
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
