// RUN: smp-opt %s '--smp-pipeline-split=stages=2 cuts=n' '--smp-build-train-step=loss=y microbatches=2 pp=2' | FileCheck %s
// RUN: smp-opt %s '--smp-pipeline-split=stages=2 cuts=n' '--smp-build-train-step=loss=y microbatches=2 pp=2' '--smp-pipeline-schedule=pp=2 schedule=1f1b' | FileCheck %s --check-prefix=RANKS

// A parameter added to the hidden state (the rows of an embedding that the
// exporter folded) whose micro-batch has its shape: its gradient is the
// input gradient of the next stage's layer norm itself, with no op of its
// own (its parameter comes after the norm's in the arguments, so the
// norm's weight did not set the stage last). That op stays on the norm's stage; it used to take the parameter's
// stage (0) for micro-batch 0, so rank 0 read the norm's weight, a copy
// that only rank 1 updates: after the first step rank 0 computed with the
// initial weight (DistilBERT under dp 2 x pp 4 interleaved, AdamW).
// CHECK-LABEL: func.func @train_step
// CHECK: smp.layer_norm_grad {{.*}}smp.bwd, smp.mb = 0 : i64, smp.stage = 1 : i64
// CHECK: smp.layer_norm_grad {{.*}}smp.bwd, smp.mb = 1 : i64, smp.stage = 1 : i64
// Only rank 1 reads the norm's weight and bias, and it updates them.
// RANKS-LABEL: func.func @train_step_pp0(
// RANKS-NOT: smp.param = "g"
// RANKS-SAME: smp.param = "p"
// RANKS-NOT: func.func
// RANKS-NOT: smp.param = "g"
// RANKS: func.func @train_step_pp1({{.*}}smp.param = "g"
// RANKS-SAME: smp.update = "g"
module {
  func.func @main(%x: tensor<2x8xf32> {smp.input = "x"},
                  %g: tensor<8xf32> {smp.param = "g"},
                  %b: tensor<8xf32> {smp.param = "b"},
                  %p: tensor<2x8xf32> {smp.param = "p"},
                  %w: tensor<8x8xf32> {smp.param = "w"})
      -> (tensor<f32> {smp.output = "y"}) {
    %e = smp.add %x, %p : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %n = smp.layer_norm %e, %g, %b {axis = 1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc("n")
    %q = smp.matmul %n, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %t = smp.tanh %q : tensor<2x8xf32>
    %y = smp.reduce_sum %t {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x8xf32> -> tensor<f32>
    return %y : tensor<f32>
  }
}
