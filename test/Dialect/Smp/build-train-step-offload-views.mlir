// RUN: smp-opt %s '--smp-build-train-step=loss=y offload=true offload-min-bytes=64' | FileCheck %s

// Offloading sees through views: q is read by the backward only through
// its [2, 16] view, so q is offloaded and the backward reads the same view
// of the prefetched copy (a packed attention's q, k and v are read so; they
// stayed on the device). A value made from the weights alone (w2's
// transpose) is not offloaded: the weights stay on the device anyway.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[Q:.*]] = smp.matmul %arg0, %arg1 :
// CHECK: %[[HQ:.*]] = smp.offload %[[Q]] : tensor<4x8xf32>
// CHECK: %[[WT:.*]] = smp.transpose %arg2
// CHECK-NOT: smp.offload %[[WT]]
// CHECK: %[[PQ:.*]] = smp.prefetch %[[HQ]] : tensor<4x8xf32>
// CHECK-NEXT: %[[VQ:.*]] = smp.reshape %[[PQ]] {{.*}}: tensor<4x8xf32> -> tensor<2x16xf32>
// CHECK: smp.mul %{{.*}}, %[[VQ]] {{.*}}: (tensor<2x16xf32>, tensor<2x16xf32>)
module {
  func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                  %w1: tensor<8x8xf32> {smp.param = "w1"},
                  %w2: tensor<8x16xf32> {smp.param = "w2"})
      -> (tensor<f32> {smp.output = "y"}) {
    %q = smp.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %v = smp.reshape %q : tensor<4x8xf32> -> tensor<2x16xf32>
    %m = smp.mul %v, %v : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
    %mr = smp.reshape %m : tensor<2x16xf32> -> tensor<4x8xf32>
    %wt = smp.transpose %w2 {perm = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
    %o = smp.matmul %mr, %w2 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %o2 = smp.matmul %o, %wt : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %t = smp.tanh %o2 : tensor<4x8xf32>
    %y = smp.reduce_sum %t {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
    return %y : tensor<f32>
  }
}
