// RUN: smp-opt %s '--smp-build-train-step=loss=y recompute=full' | FileCheck %s

// A mask made from the data (an attention mask input, as BERT has) and read
// by every block crosses every cut of full recomputation's segments: it is
// not counted when the cuts are chosen (it is read across most of the
// forward), or the only cuts were after its last reader and both blocks
// were one segment, recomputed at once.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[MK:.*]] = smp.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
// CHECK: %[[H1:.*]] = smp.add %{{.*}}, %{{.*}} : (tensor<4x8xbf16>
// The second block, recomputed from h1 and the mask before its backward ...
// CHECK: %[[Q2:.*]] = smp.matmul %[[H1]], %{{.*}} {smp.recomputed}
// CHECK: smp.mul %[[Q2]], %[[MK]] {smp.recomputed}
// ... its backward, then the first block on its own.
// CHECK: smp.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<4x8xbf16>, tensor<8x8xbf16>)
// CHECK: smp.matmul %{{.*}}, %{{.*}} {smp.recomputed}
module {
  func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                  %m: tensor<4x8xf32> {smp.input = "mask"},
                  %w1: tensor<8x8xf32> {smp.param = "w1"},
                  %w2: tensor<8x8xf32> {smp.param = "w2"},
                  %g: tensor<8xf32> {smp.param = "g"})
      -> (tensor<f32> {smp.output = "y"}) {
    %c1 = smp.cast %w1 : tensor<8x8xf32> to tensor<8x8xbf16>
    %c2 = smp.cast %w2 : tensor<8x8xf32> to tensor<8x8xbf16>
    %cg = smp.cast %g : tensor<8xf32> to tensor<8xbf16>
    %mk = smp.cast %m : tensor<4x8xf32> to tensor<4x8xbf16>
    %xb = smp.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
    %e = smp.mul %xb, %cg : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
    %q1 = smp.matmul %e, %c1 : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
    %m1 = smp.mul %q1, %mk : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    %t1 = smp.tanh %m1 : tensor<4x8xbf16>
    %h1 = smp.add %e, %t1 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    %q2 = smp.matmul %h1, %c2 : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
    %m2 = smp.mul %q2, %mk : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    %t2 = smp.tanh %m2 : tensor<4x8xbf16>
    %h2 = smp.add %h1, %t2 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    %h2f = smp.cast %h2 : tensor<4x8xbf16> to tensor<4x8xf32>
    %y = smp.reduce_sum %h2f {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
    return %y : tensor<f32>
  }
}
