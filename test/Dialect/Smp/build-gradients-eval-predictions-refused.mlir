// smp-build-gradients eval-predictions reads each sample's predictions
// from rows that hold the samples one after another along dim 0: logits
// whose batch moved behind the sequence are refused (one replica, one
// micro-batch: nothing else refuses them first).
// RUN: smp-opt %s -verify-diagnostics '--smp-build-gradients=loss=cross_entropy:logits:labels eval-predictions=1'
// RUN: smp-opt %s -verify-diagnostics '--smp-build-gradients=loss=mse:logits:t eval-metrics=pearson'

// Logits that do not hold the samples one after another along dim 0 (the
// batch moved behind the sequence) are refused.
module {
  // expected-error @+1 {{--eval-predictions: each sample's predictions are read from the}}
  func.func @main(%x: tensor<4x2x3xf32> {smp.input = "x"}, %w: tensor<3x5xf32> {smp.param = "w"}) -> (tensor<2x4x5xf32> {smp.output = "logits"}) {
    %y = smp.matmul %x, %w : (tensor<4x2x3xf32>, tensor<3x5xf32>) -> tensor<4x2x5xf32>
    %t = smp.transpose %y {perm = array<i64: 1, 0, 2>} : tensor<4x2x5xf32> -> tensor<2x4x5xf32>
    return %t : tensor<2x4x5xf32>
  }
}
