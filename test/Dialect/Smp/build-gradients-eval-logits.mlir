// smp-build-gradients eval-logits (smpc --eval-logits): the predictions
// are the rows of the cross-entropy's logits themselves, f32 [samples,
// rows per sample, classes] (the Trainer's EvalPrediction without
// preprocess_logits_for_metrics), for at most 1024 classes.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-build-gradients=loss=cross_entropy:logits:labels eval-predictions=1 eval-logits=1' | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {smp.output = "loss"}, tensor<4x2x5xf32> {smp.output = "eval_predictions"}, tensor<4x2xf32> {smp.output = "eval_label_ids"})
// CHECK: %[[Z:.*]] = smp.matmul
// CHECK: %[[ROWS:.*]] = smp.reshape %[[Z]] : tensor<4x2x5xf32> -> tensor<4x10xf32>
// CHECK: %[[P:.*]] = smp.reshape %[[ROWS]] : tensor<4x10xf32> -> tensor<4x2x5xf32>
// CHECK-NOT: smp.reduce_max
// CHECK: return {{.*}}, %[[P]], %{{.*}} :
module {
  func.func @main(%x: tensor<4x2x3xf32> {smp.input = "x"}, %w: tensor<3x5xf32> {smp.param = "w"}) -> (tensor<4x2x5xf32> {smp.output = "logits"}) {
    %y = smp.matmul %x, %w : (tensor<4x2x3xf32>, tensor<3x5xf32>) -> tensor<4x2x5xf32>
    return %y : tensor<4x2x5xf32>
  }
}

// -----

// A language model's logits are refused (their argmax is
// --eval-predictions).
module {
  // expected-error @+1 {{--eval-logits: the logits have 2000 classes, and an evaluation returns the logits of at most 1024 (a classifier's); a language model's predictions are --eval-predictions (their argmax)}}
  func.func @main(%x: tensor<4x3xf32> {smp.input = "x"}, %w: tensor<3x2000xf32> {smp.param = "w"}) -> (tensor<4x2000xf32> {smp.output = "logits"}) {
    %y = smp.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2000xf32>) -> tensor<4x2000xf32>
    return %y : tensor<4x2000xf32>
  }
}
