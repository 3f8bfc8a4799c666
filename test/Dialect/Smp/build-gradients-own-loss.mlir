// smp-build-gradients with --loss NAME, a scalar output the model computes
// itself, split over data-parallel ranks or micro-batches (LossShare.cpp):
// each shard differentiates its exact share of the one-device loss, or the
// loss is refused with what to do.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-build-gradients=loss=loss dp=2' | FileCheck %s

// A sum over the batch: each rank's own sum is its share (no division).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[SUM:.*]] = smp.reduce_sum
// CHECK-NOT: smp.div
// CHECK: return %{{.*}}, %[[SUM]]
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %s = smp.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A mean over the batch plus a term without the batch (a penalty on w):
// mean / 2 + (0.5 * sum(w)) / 2.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[MEAN:.*]] = smp.reduce_mean
// CHECK: %[[PEN:.*]] = smp.mul
// CHECK: %[[TWO:.*]] = smp.constant dense<2.000000e+00>
// CHECK: %[[A:.*]] = smp.div %[[MEAN]], %[[TWO]]
// CHECK: %[[TWO2:.*]] = smp.constant dense<2.000000e+00>
// CHECK: %[[B:.*]] = smp.div %[[PEN]], %[[TWO2]]
// CHECK: %[[SHARE:.*]] = smp.add %[[A]], %[[B]]
// CHECK: return %{{.*}}, %[[SHARE]]
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %m = smp.reduce_mean %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    %p = smp.reduce_sum %w {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x3xf32> -> tensor<f32>
    %h = smp.constant dense<5.000000e-01> : tensor<f32>
    %q = smp.mul %h, %p : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %l = smp.add %m, %q : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A cross-entropy mean over the labels not ignored: the rank's sum over the
// count of every rank's labels (the class weights of those labels).
// CHECK-LABEL: func.func @train_step
// CHECK: %[[SUM:.*]] = smp.cross_entropy %{{.*}}, %arg1, %arg3 {ignore_index = 3 : i64, reduction = #smp<reduction sum>}
// CHECK: %[[IGN:.*]] = smp.equal %arg1
// CHECK: %[[PICK:.*]] = smp.gather %arg3
// CHECK: %[[W:.*]] = smp.where %[[IGN]], %{{.*}}, %[[PICK]]
// CHECK: %[[COUNT:.*]] = smp.reduce_sum %[[W]]
// CHECK: %[[ALL:.*]] = shard.all_reduce %[[COUNT]] on @dp
// CHECK: %[[SHARE:.*]] = smp.div %[[SUM]], %[[ALL]]
// CHECK: return %{{.*}}, %[[SHARE]]
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %l: tensor<2xi64> {smp.input = "labels"}, %w: tensor<3x3xf32> {smp.param = "w"}, %cw: tensor<3xf32> {smp.param = "cw"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %c = smp.cross_entropy %y, %l, %cw {ignore_index = 3 : i64} : (tensor<2x3xf32>, tensor<2xi64>, tensor<3xf32>) -> tensor<f32>
    return %c : tensor<f32>
  }
}

// -----

// sum / x.size(0): smpc marked the divisor as folded from the batch's shape
// (smp.batch_scaled = 1), so the share divides by the whole batch's size.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[SUM:.*]] = smp.reduce_sum
// CHECK: %[[B:.*]] = smp.constant dense<2.000000e+00>
// CHECK: %[[K:.*]] = smp.mul %[[B]], %{{.*}}
// CHECK: %[[SHARE:.*]] = smp.div %[[SUM]], %[[K]]
// CHECK: return %{{.*}}, %[[SHARE]]
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %s = smp.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    %b = smp.constant dense<2.000000e+00> : tensor<f32>
    %l = smp.div %s, %b {smp.batch_scaled = 1 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A product of two values from the batch has no per-shard share.
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %m = smp.reduce_mean %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @+1 {{cannot split the loss output 'loss' over 2 data-parallel rank(s) x 1 micro-batch(es): it multiplies two values computed from the batch}}
    %l = smp.mul %m, %m : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// A ratio whose denominator depends on the parameters is refused (its
// gradient would need every rank's numerator).
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %s = smp.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    %e = smp.exp %y : tensor<2x3xf32>
    %d = smp.reduce_sum %e {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    // expected-error @+1 {{it divides by a sum over the batch computed from the parameters}}
    %l = smp.div %s, %d : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// smpc could not tell whether a constant came from the batch's shape (its
// second import failed): scaling by it is refused, not guessed.
module attributes {smp.batch_scaling_unknown} {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %y = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %s = smp.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    %b = smp.constant dense<2.000000e+00> : tensor<f32>
    // expected-error @+1 {{it scales by a constant that may have been folded from the batch's shape}}
    %l = smp.div %s, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
