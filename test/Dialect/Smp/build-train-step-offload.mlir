// RUN: smp-opt %s '--smp-build-train-step=loss=y offload=true offload-min-bytes=64' | FileCheck %s
// RUN: smp-opt %s '--smp-build-train-step=loss=y offload=true offload-min-bytes=64 offload-horizon=2' | FileCheck %s --check-prefix=H2
// RUN: smp-opt %s '--smp-build-train-step=loss=y offload=true offload-min-bytes=1000000' | FileCheck %s --check-prefix=BIG
// RUN: smp-opt %s '--smp-build-train-step=loss=y offload=true offload-min-bytes=64 recompute=full' | FileCheck %s --check-prefix=RC

// Activation offloading: every activation the backward reads is copied to
// host memory right after its last forward use and prefetched back before
// the backward needs it; the backward reads the prefetched copy. But the
// first one it reads (horizon 1: the second block's tanh) stays: it would
// be fetched back as soon as the backward starts.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Q1:.*]] = smp.matmul %{{.*}}, %arg1 :
// CHECK: %[[P1:.*]] = smp.softmax
// CHECK: smp.matmul %[[P1]], %[[Q1]] :
// CHECK-NEXT: %[[HP1:.*]] = smp.offload %[[P1]] : tensor<4x4xf32>
// CHECK-NEXT: %[[HQ1:.*]] = smp.offload %[[Q1]] : tensor<4x8xf32>
// CHECK: smp.offload %{{.*}} : tensor<4x4xf32>
// CHECK-NEXT: smp.offload %{{.*}} : tensor<4x8xf32>
// CHECK-NEXT: %[[T2:.*]] = smp.tanh
// CHECK-NOT: smp.offload %[[T2]]
// The backward: one prefetch ahead (horizon 1): the second activation the
// backward reads is fetched before the first one is read.
// CHECK: smp.prefetch %{{.*}} : tensor<4x8xf32>
// CHECK-NEXT: smp.mul %[[T2]], %[[T2]]
// The first block's Q and P come back last and are what its backward reads.
// CHECK: %[[BQ1:.*]] = smp.prefetch %[[HQ1]] : tensor<4x8xf32>
// CHECK: %[[BP1:.*]] = smp.prefetch %[[HP1]] : tensor<4x4xf32>
// CHECK: smp.matmul %{{.*}}, %[[BQ1]] {transpose_rhs = true}
// CHECK: smp.matmul %[[BP1]], %{{.*}} {transpose_lhs = true}
// CHECK: return

// Horizon 2: the first two the backward reads stay (6 offloaded, 7 with
// horizon 1), and the third is fetched before the backward's first read.
// H2-LABEL: func.func @train_step
// H2-COUNT-6: smp.offload
// H2-NOT: smp.offload
// H2: smp.prefetch
// H2-NEXT: smp.mul

// Activations under the size threshold stay on the device.
// BIG-NOT: smp.offload

// After full recomputation only the checkpoints (the residual stream) are
// offloaded, but for the first the backward reads (h1).
// RC-LABEL: func.func @train_step
// RC-COUNT-1: smp.offload {{.*}} : tensor<4x8xf32>
// RC-NOT: smp.offload

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
