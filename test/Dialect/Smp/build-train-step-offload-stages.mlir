// RUN: smp-opt %s '--smp-pipeline-split=stages=2 cuts=q2' '--smp-build-train-step=loss=y microbatches=2 pp=2 offload=true offload-min-bytes=64' | FileCheck %s
// RUN: smp-opt %s '--smp-pipeline-split=stages=2 cuts=q2' '--smp-build-train-step=loss=y microbatches=2 pp=2 offload=true offload-min-bytes=64' '--smp-pipeline-schedule=pp=2 schedule=1f1b' 2>/dev/null | awk '/func.func/{delete p} /= smp.prefetch/{p[$1]=1} $1=="smp.send"{if ($2 in p) k++} END{print k+0}' | FileCheck %s --check-prefix=SENT

// Under pipeline stages a value is fetched back for its own stage's
// backward only. h1, made by stage 0 and read by stage 1 (q2 = h1 w2, whose
// weight gradient reads h1 again), stays: stage 1's rank received its own
// copy in the forward, and a prefetch in stage 0's backward comes after
// stage 1's backward, which waits for it (under the interleaved schedule,
// where a rank runs both, every rank hung in a receive). The activations
// stage 0's own backward reads (e, t1) move as before.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[E:.*]] = smp.mul {{.*}}smp.mb = 0 : i64, smp.stage = 0 : i64
// CHECK: %[[T1:.*]] = smp.tanh {{.*}}smp.mb = 0 : i64, smp.stage = 0 : i64
// CHECK: %[[H1:.*]] = smp.add %[[E]], %[[T1]] {smp.mb = 0 : i64, smp.stage = 0 : i64}
// CHECK-NOT: smp.offload %[[H1]]
// CHECK: smp.offload %[[E]]
// CHECK: smp.offload %[[T1]]
// CHECK-NOT: smp.offload %[[H1]]
// CHECK: smp.matmul %[[H1]], %{{.*}} {smp.bwd, smp.mb = 0 : i64, smp.stage = 1 : i64, transpose_lhs = true}
// No rank sends a prefetched copy (the old code sent h1 again, fetched back
// on stage 0's rank, for stage 1's backward).
// SENT: {{^}}0{{$}}
module {
  func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                  %w1: tensor<8x8xf32> {smp.param = "w1"},
                  %w2: tensor<8x8xf32> {smp.param = "w2"},
                  %g: tensor<8xf32> {smp.param = "g"})
      -> (tensor<f32> {smp.output = "y"}) {
    %e = smp.mul %x, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %q1 = smp.matmul %e, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %t1 = smp.tanh %q1 : tensor<4x8xf32>
    %h1 = smp.add %e, %t1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %q2 = smp.matmul %h1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("q2")
    %t2 = smp.tanh %q2 : tensor<4x8xf32>
    %h2 = smp.add %h1, %t2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %y = smp.reduce_sum %h2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
    return %y : tensor<f32>
  }
}
