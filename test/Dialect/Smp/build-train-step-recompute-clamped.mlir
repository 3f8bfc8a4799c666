// RUN: smp-opt %s '--smp-build-train-step=loss=y recompute=selective' | FileCheck %s

// Selective recomputation finds an attention core through any elementwise
// op between the scores and the softmax: here OPT's clamp of the scaled
// scores, max(s, finfo(f32).min), and a power (ops with the Elementwise or
// BroadcastingElementwise trait). The core (scores' matmul, scale, clamp,
// pow, softmax) is recomputed before the backward; the rest is not.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: smp.tanh {{.*}}smp.recomputed
// CHECK: smp.matmul %{{.*}}, %{{.*}} {smp.recomputed, transpose_rhs = true}
// CHECK-NEXT: smp.mul {{.*}} {smp.recomputed}
// CHECK-NEXT: smp.max {{.*}} {smp.recomputed}
// CHECK-NEXT: smp.pow {{.*}} {smp.recomputed}
// CHECK-NEXT: smp.softmax {{.*}} {axis = 1 : i64, smp.recomputed}

module {
  func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                  %w: tensor<8x8xf32> {smp.param = "w"})
      -> (tensor<f32> {smp.output = "y"}) {
    %scale = smp.constant dense<0.35> : tensor<f32>
    %floor = smp.constant dense<-3.40282347e+38> : tensor<f32>
    %one = smp.constant dense<1.0> : tensor<f32>
    %q = smp.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %s = smp.matmul %q, %q {transpose_rhs = true} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x4xf32>
    %m = smp.mul %s, %scale : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    %c = smp.max %m, %floor : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    %e = smp.pow %c, %one : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    %p = smp.softmax %e {axis = 1 : i64} : tensor<4x4xf32>
    %a = smp.matmul %p, %q : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %t = smp.tanh %a : tensor<4x8xf32>
    %y = smp.reduce_sum %t {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
    return %y : tensor<f32>
  }
}
