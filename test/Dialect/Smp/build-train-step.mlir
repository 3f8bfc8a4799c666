// RUN: smp-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(smp-build-train-step{loss=cross_entropy:logits:labels optimizer=adamw})' | FileCheck %s

// A linear classifier: the step takes labels, @lr and @step, keeps Adam's
// two states per parameter, and returns the updates, the loss and the norm.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x3xf32> {smp.input = "x"}
// CHECK-SAME: %[[W:[^:]*]]: tensor<5x3xf32> {smp.param = "w"}
// CHECK-SAME: %[[B:[^:]*]]: tensor<5xf32> {smp.param = "b"}
// CHECK-SAME: %[[M:[^:]*]]: tensor<4xi64> {smp.frozen, smp.param = "mask_table"}
// CHECK-SAME: %[[Y:[^:]*]]: tensor<4xi64> {smp.input = "labels"}
// CHECK-SAME: %[[LR:[^:]*]]: tensor<f32> {smp.input = "@lr"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<f32> {smp.input = "@step"}
// CHECK-SAME: {smp.state = "w.exp_avg"}
// CHECK-SAME: {smp.state = "w.exp_avg_sq"}
// CHECK-SAME: {smp.state = "b.exp_avg"}
// CHECK-SAME: {smp.state = "b.exp_avg_sq"}
// CHECK-SAME: -> (tensor<5x3xf32> {smp.update = "w"}, tensor<5x3xf32> {smp.update = "w.exp_avg"}, tensor<5x3xf32> {smp.update = "w.exp_avg_sq"}, tensor<5xf32> {smp.update = "b"}, {{.*}}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"})
// CHECK: %[[LOGITS:.*]] = smp.add
// CHECK: %[[LOSS:.*]] = smp.cross_entropy %[[LOGITS]], %[[Y]]
// CHECK: %[[DL:.*]] = smp.cross_entropy_grad %[[LOGITS]], %[[Y]], %{{.*}} :
// CHECK: smp.matmul %[[DL]], %[[X]] {transpose_lhs = true}
// CHECK: %[[NORM:.*]] = smp.sqrt
// CHECK: smp.adam_update %[[W]], %{{.*}}, %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]] {{{.*}}weight_decay = 0.00999999977 : f32}
// CHECK: smp.adam_update %[[B]]
// CHECK: return {{.*}}, %[[LOSS]], %[[NORM]]
func.func @main(%x: tensor<4x3xf32> {smp.input = "x"},
                %w: tensor<5x3xf32> {smp.param = "w"},
                %b: tensor<5xf32> {smp.param = "b"},
                %m: tensor<4xi64> {smp.param = "mask_table", smp.frozen})
    -> (tensor<4x5xf32> {smp.output = "logits"}) {
  %0 = smp.matmul %x, %w {transpose_rhs = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %1 = smp.add %0, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return %1 : tensor<4x5xf32>
}

// -----

// A parameter the loss does not depend on gets no update and no state.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: smp.state = "unused
// CHECK-NOT: smp.update = "unused"
// CHECK: smp.adam_update
// CHECK-NOT: smp.adam_update
func.func @main(%x: tensor<2x3xf32> {smp.input = "x"},
                %w: tensor<3x4xf32> {smp.param = "w"},
                %u: tensor<4xf32> {smp.param = "unused"})
    -> (tensor<2x4xf32> {smp.output = "logits"}, tensor<4xf32> {smp.output = "u"}) {
  %0 = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0, %u : tensor<2x4xf32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{the model has no output named 'logits' (outputs: y)}}
func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
  return %x : tensor<2x3xf32>
}
