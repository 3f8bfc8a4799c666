// smp-build-gradients with --loss NAME over micro-batches
// (LossShare.cpp): a cross-entropy mean counts the labels of the whole step
// (each micro-batch's count, its ops cloned on every micro-batch's slice of
// the inputs, built once for the step), so each micro-batch's share is its
// sum over that count.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-build-gradients=loss=loss microbatches=2' | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[FULL:[^:]*]]: tensor<4xi64> {smp.input = "labels"}
// CHECK: %[[SUM0:.*]] = smp.cross_entropy {{.*}}reduction = #smp<reduction sum>{{.*}}smp.mb = 0
// CHECK: %[[S0:.*]] = smp.slice %[[FULL]] {limits = array<i64: 2>, smp.mb = 0 : i64, starts = array<i64: 0>
// CHECK: smp.equal %[[S0]]
// CHECK: %[[C0:.*]] = smp.reduce_sum
// CHECK: %[[S1:.*]] = smp.slice %[[FULL]] {limits = array<i64: 4>, smp.mb = 0 : i64, starts = array<i64: 2>
// CHECK: smp.equal %[[S1]]
// CHECK: %[[C1:.*]] = smp.reduce_sum
// CHECK: %[[COUNT:.*]] = smp.add %[[C0]], %[[C1]]
// CHECK: smp.div %[[SUM0]], %[[COUNT]]
// CHECK: %[[SUM1:.*]] = smp.cross_entropy {{.*}}reduction = #smp<reduction sum>{{.*}}smp.mb = 1
// Micro-batch 1 divides by the same count, built once for the step.
// CHECK-NOT: smp.slice %[[FULL]]
// CHECK: smp.div %[[SUM1]], %[[COUNT]]
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %l: tensor<2xi64> {smp.input = "labels"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %c = smp.cross_entropy %y, %l : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// Labels shifted inside the model (a slice along the sequence of each
// micro-batch's slice) are counted by cloning that slice, the comparison
// with ignore_index and the sum once per micro-batch (on micro-batch 0's
// and 1's slices of the input) and adding them.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[FULL:[^:]*]]: tensor<4x3xi64> {smp.input = "labels"}
// CHECK: smp.cross_entropy {{.*}}reduction = #smp<reduction sum>{{.*}}smp.mb = 0
// CHECK: %[[S0:.*]] = smp.slice %[[FULL]] {limits = array<i64: 2, 3>, {{.*}}starts = array<i64: 0, 0>
// CHECK: %[[T0:.*]] = smp.slice %[[S0]] {limits = array<i64: 2, 3>, {{.*}}starts = array<i64: 0, 1>
// CHECK: smp.equal %[[T0]]
// CHECK: %[[S1:.*]] = smp.slice %[[FULL]] {limits = array<i64: 4, 3>, {{.*}}starts = array<i64: 2, 0>
// CHECK: %[[T1:.*]] = smp.slice %[[S1]] {limits = array<i64: 2, 3>, {{.*}}starts = array<i64: 0, 1>
// CHECK: smp.equal %[[T1]]
// CHECK: smp.add
// CHECK: smp.div
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %l: tensor<2x3xi64> {smp.input = "labels"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %s = smp.slice %l {limits = array<i64: 2, 3>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : tensor<2x3xi64> -> tensor<2x2xi64>
    %t = smp.slice %y {limits = array<i64: 2, 2>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x2xf32>
    %u = smp.reshape %t : tensor<2x2xf32> -> tensor<2x2x1xf32>
    %e = smp.expand %u : tensor<2x2x1xf32> -> tensor<2x2x3xf32>
    %c = smp.cross_entropy %e, %s : (tensor<2x2x3xf32>, tensor<2x2xi64>) -> tensor<f32>
    return %c : tensor<f32>
  }
}
