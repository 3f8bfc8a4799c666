// smp-build-gradients eval-predictions, eval-metrics=pearson with a model's
// own loss (a Hugging Face regression's: MSELoss of its output and the
// labels): the predictions are the values of the loss's one mean squared
// error (a mean over every element of d * d or d ^ 2, d = output -
// target), the output the side computed from parameters.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-build-gradients=loss=loss eval-metrics=pearson' | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<4xf32> {smp.input = "t"}
// CHECK-SAME: {smp.output = "eval_predictions"}, tensor<4x1xf32> {smp.output = "eval_label_ids"})
// CHECK: %[[Y:.*]] = smp.reshape {{.*}} : tensor<4x1xf32> -> tensor<4xf32>
// CHECK: %[[P:.*]] = smp.reshape %[[Y]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: %[[L:.*]] = smp.reshape %[[T]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: return {{.*}}, %[[P]], %[[L]] :
module {
  func.func @main(%x: tensor<4x3xf32> {smp.input = "x"}, %t: tensor<4xf32> {smp.input = "t"}, %w: tensor<3x1xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<4x3xf32>, tensor<3x1xf32>) -> tensor<4x1xf32>
    %s = smp.reshape %y : tensor<4x1xf32> -> tensor<4xf32>
    %d = smp.sub %s, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %q = smp.mul %d, %d : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %l = smp.reduce_mean %q {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A mean absolute error gives none.
module {
  // expected-error @+1 {{--eval-metrics pearson: the model's own loss 'loss' is computed from no mean squared error of an output and a target (nn.MSELoss, a regression's loss); its predictions are the values of exactly one (export the model's output and pass --loss mse:OUTPUT:TARGET)}}
  func.func @main(%x: tensor<4x3xf32> {smp.input = "x"}, %t: tensor<4x5xf32> {smp.input = "t"}, %w: tensor<3x5xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %d = smp.sub %y, %t : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
    %a = smp.abs %d : tensor<4x5xf32>
    %l = smp.reduce_mean %a {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x5xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
