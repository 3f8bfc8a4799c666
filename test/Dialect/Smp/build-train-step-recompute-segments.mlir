// RUN: smp-opt %s '--smp-build-train-step=loss=y recompute=full' | FileCheck %s
// RUN: smp-opt %s '--smp-build-train-step=loss=y recompute=full microbatches=2' | FileCheck %s --check-prefix=MB
// RUN: smp-opt %s '--smp-pipeline-split=stages=2 cuts=t2' '--smp-build-train-step=loss=y recompute=full microbatches=2 pp=2' '--smp-pipeline-schedule=pp=2 schedule=1f1b' 2>/dev/null | awk '/func.func @train_step_pp0/,/^  }/' | grep -c smp.send | FileCheck %s --check-prefix=SENDS

// Segments of full recomputation are cut where the fewest activations
// cross, counting only values computed from the data: the weights' casts at
// the top (as mixed precision writes them) and a mask computed from a
// constant and read by every block (as smp-modelgen writes it) cross every
// cut, and before the data arrives nothing crosses at all.
// Counting them, or taking that empty stretch as the fewest, used to leave
// one segment: the whole forward recomputed at once.
// Unrolled into micro-batches, each forward reads its slice of the input,
// which is made outside that forward: the slice is the data all the same
// (it was not counted as such, so nothing crossed any cut and the whole
// forward was one segment again).
// MB: %[[H1:.*]] = smp.add %{{.*}}, %{{.*}} {smp.mb = 0 : i64, smp.stage = 0 : i64}
// MB: smp.add %[[H1]], %{{.*}} {smp.mb = 0 : i64
// MB: smp.matmul %[[H1]], %{{.*}} {smp.bwd, smp.mb = 0 : i64, smp.recomputed
// A pipeline stage's segments end with the stage: cut at t2 (inside the
// second block), stage 0 sends h1 and m2 per micro-batch and the loss's
// share, 5 sends; a segment across the cut recomputed stage 0's part on
// rank 0 for rank 1's backward and sent it again (9).
// SENDS: {{^}}5{{$}}
// CHECK-LABEL: func.func @train_step
// CHECK: %[[E:.*]] = smp.mul %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8xbf16>)
// CHECK: %[[H1:.*]] = smp.add %[[E]], %{{.*}} : (tensor<4x8xbf16>
// The second block, recomputed from h1 before its backward ...
// CHECK: smp.matmul %[[H1]], %{{.*}} {smp.recomputed}
// CHECK: smp.tanh {{.*}}smp.recomputed
// ... its backward, then the first block, recomputed from e on its own.
// CHECK: smp.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<4x8xbf16>, tensor<8x8xbf16>)
// CHECK: smp.matmul %[[E]], %{{.*}} {smp.recomputed}
module {
  func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                  %w1: tensor<8x8xf32> {smp.param = "w1"},
                  %w2: tensor<8x8xf32> {smp.param = "w2"},
                  %g: tensor<8xf32> {smp.param = "g"})
      -> (tensor<f32> {smp.output = "y"}) {
    %c1 = smp.cast %w1 : tensor<8x8xf32> to tensor<8x8xbf16>
    %c2 = smp.cast %w2 : tensor<8x8xf32> to tensor<8x8xbf16>
    %cg = smp.cast %g : tensor<8xf32> to tensor<8xbf16>
    %k0 = smp.constant dense<5.000000e-01> : tensor<4x8xbf16>
    %k = smp.trilu %k0 {upper = true, k = 0 : i64} : tensor<4x8xbf16>
    %xb = smp.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
    %e = smp.mul %xb, %cg : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
    %q1 = smp.matmul %e, %c1 : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
    %m1 = smp.mul %q1, %k : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    %t1 = smp.tanh %m1 : tensor<4x8xbf16>
    %h1 = smp.add %e, %t1 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    %q2 = smp.matmul %h1, %c2 : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
    %m2 = smp.mul %q2, %k : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    %t2 = smp.tanh %m2 : tensor<4x8xbf16> loc("t2")
    %h2 = smp.add %h1, %t2 : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
    %h2f = smp.cast %h2 : tensor<4x8xbf16> to tensor<4x8xf32>
    %y = smp.reduce_sum %h2f {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
    return %y : tensor<f32>
  }
}
