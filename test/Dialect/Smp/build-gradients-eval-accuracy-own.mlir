// smp-build-gradients eval-accuracy with a model's own loss (--loss NAME):
// the label ranks of the one cross-entropy the loss is computed from (its
// logits, labels and ignore_index: a Hugging Face model's shifted labels);
// an own loss with no cross-entropy, or several, is refused.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-build-gradients=loss=loss eval-accuracy=1' | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {smp.output = "eval_hits"}, tensor<f32> {smp.output = "eval_labels"})
// CHECK: %[[Z:.*]] = smp.slice
// CHECK: %[[Y:.*]] = smp.slice
// CHECK: smp.cross_entropy %[[Z]], %[[Y]] {ignore_index = 0 : i64}
// CHECK: %[[RANK:.*]] = smp.label_rank %[[Z]], %[[Y]], %{{.*}} {classes = 5 : i64, ignore_index = 0 : i64} : (tensor<2x2x5xf32>, tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xf32>
// The labels its ignore_index (0) leaves out count nothing.
// CHECK: %[[IGN:.*]] = smp.constant dense<0> : tensor<i64>
// CHECK-NEXT: smp.equal %[[Y]], %[[IGN]]
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}, %lab: tensor<2x3xi64> {smp.input = "labels"},
                  %w: tensor<4x5xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %z = smp.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    %zs = smp.slice %z {starts = array<i64: 0, 0, 0>, limits = array<i64: 2, 2, 5>, steps = array<i64: 1, 1, 1>} : tensor<2x3x5xf32> -> tensor<2x2x5xf32>
    %ys = smp.slice %lab {starts = array<i64: 0, 1>, limits = array<i64: 2, 3>, steps = array<i64: 1, 1>} : tensor<2x3xi64> -> tensor<2x2xi64>
    %l = smp.cross_entropy %zs, %ys {ignore_index = 0 : i64} : (tensor<2x2x5xf32>, tensor<2x2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  // expected-error @+1 {{--eval-accuracy: the model's own loss 'loss' is computed from no cross-entropy; an evaluation's metrics need exactly one, whose logits' argmax is compared with its labels (leave --eval-accuracy out, or export the model's logits and pass --loss cross_entropy:LOGITS:LABELS, or mse:OUTPUT:TARGET for a regression)}}
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}, %w: tensor<4x5xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %z = smp.matmul %x, %w : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
    %s = smp.reduce_mean %z {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x5xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Two cross-entropies (a question-answering model's start and end
// positions): which one's accuracy would be ambiguous.
module {
  // expected-error @+1 {{--eval-accuracy: the model's own loss 'loss' is computed from 2 cross-entropies; an evaluation's metrics need exactly one}}
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}, %a: tensor<2xi64> {smp.input = "a"},
                  %b: tensor<2xi64> {smp.input = "b"}, %w: tensor<4x5xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %z = smp.matmul %x, %w : (tensor<2x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
    %la = smp.cross_entropy %z, %a : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
    %lb = smp.cross_entropy %z, %b : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<f32>
    %s = smp.add %la, %lb : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}
