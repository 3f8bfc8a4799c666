// smp-build-gradients with --loss NAME over micro-batches
// (LossShare.cpp): a cross-entropy mean counts the labels of the whole step
// (the input every micro-batch's labels are a slice of), so each
// micro-batch's share is its sum over that count; labels computed in the
// model cannot be counted so and are refused.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-build-gradients=loss=loss microbatches=2' | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[FULL:[^:]*]]: tensor<4xi64> {smp.input = "labels"}
// CHECK: %[[SUM0:.*]] = smp.cross_entropy {{.*}}reduction = #smp<reduction sum>{{.*}}smp.mb = 0
// CHECK: %[[IGN0:.*]] = smp.equal %[[FULL]]
// CHECK: %[[KEPT0:.*]] = smp.not %[[IGN0]]
// CHECK: %[[CAST0:.*]] = smp.cast %[[KEPT0]]
// CHECK: %[[COUNT0:.*]] = smp.reduce_sum %[[CAST0]]
// CHECK: smp.div %[[SUM0]], %[[COUNT0]]
// CHECK: %[[SUM1:.*]] = smp.cross_entropy {{.*}}reduction = #smp<reduction sum>{{.*}}smp.mb = 1
// CHECK: smp.equal %[[FULL]]
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %l: tensor<2xi64> {smp.input = "labels"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %c = smp.cross_entropy %y, %l : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// Labels shifted inside the model (a slice along the sequence) are not a
// micro-batch's slice of an input.
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %l: tensor<2x3xi64> {smp.input = "labels"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %s = smp.slice %l {limits = array<i64: 2, 3>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : tensor<2x3xi64> -> tensor<2x2xi64>
    %r = smp.reshape %y : tensor<2x3xf32> -> tensor<2x3xf32>
    %t = smp.slice %r {limits = array<i64: 2, 2>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x2xf32>
    %u = smp.reshape %t : tensor<2x2xf32> -> tensor<2x2x1xf32>
    %e = smp.expand %u : tensor<2x2x1xf32> -> tensor<2x2x3xf32>
    // expected-error @+1 {{it is a cross-entropy mean over the labels not ignored, and a micro-batch's share needs the count of the whole step's labels, but these labels are computed}}
    %c = smp.cross_entropy %e, %s : (tensor<2x2x3xf32>, tensor<2x2xi64>) -> tensor<f32>
    return %c : tensor<f32>
  }
}
