// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-loss-grad))' | FileCheck %s
// The pass: lib/Dialect/Smp/Transforms/FuseLossGrad.cpp.

// A language model's step in bf16 (padded classes, the seed a constant):
// one op at the loss's place, its gradient read by the LM head's products.
// CHECK-LABEL: func.func @step
// CHECK: %[[S:.*]] = smp.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[L:.*]], %[[G:.*]] = smp.cross_entropy_with_grad %arg0, %arg1, %[[S]] {classes = 1025 : i64} : (tensor<4x64x1032xbf16>, tensor<4x64xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x64x1032xbf16>)
// CHECK-NOT: smp.cross_entropy
// CHECK: %[[H:.*]] = smp.matmul %[[G]], %arg2
// CHECK: return %[[L]], %[[H]]
func.func @step(%x: tensor<4x64x1032xbf16>, %y: tensor<4x64xi64>, %w: tensor<1032x128xbf16>) -> (tensor<f32>, tensor<4x64x128xbf16>) {
  %s = smp.constant dense<1.0> : tensor<f32>
  %l = smp.cross_entropy %x, %y {classes = 1025 : i64} : (tensor<4x64x1032xbf16>, tensor<4x64xi64>) -> tensor<f32>
  %g = smp.cross_entropy_grad %x, %y, %s {classes = 1025 : i64} : (tensor<4x64x1032xbf16>, tensor<4x64xi64>, tensor<f32>) -> tensor<4x64x1032xbf16>
  %h = smp.matmul %g, %w : (tensor<4x64x1032xbf16>, tensor<1032x128xbf16>) -> tensor<4x64x128xbf16>
  return %l, %h : tensor<f32>, tensor<4x64x128xbf16>
}

// -----

// A pipeline stage's two micro-batches (sum reduction): the seed over the
// micro-batch count is made after the first loss and moves up before it;
// both pairs fuse, and the loss's readers (the division) read the fused
// loss.
// CHECK-LABEL: func.func @microbatches
// CHECK: %[[S:.*]] = smp.div %arg3, %arg4
// CHECK: %[[L0:.*]], %[[G0:.*]] = smp.cross_entropy_with_grad %arg0, %arg2, %[[S]] {reduction = #smp<reduction sum>}
// CHECK: %[[D0:.*]] = smp.div %[[L0]], %arg4
// CHECK: %[[L1:.*]], %[[G1:.*]] = smp.cross_entropy_with_grad %arg1, %arg2, %[[S]] {reduction = #smp<reduction sum>}
// CHECK-NOT: smp.cross_entropy_grad
// CHECK: return %[[D0]], %[[G0]], %[[L1]], %[[G1]]
func.func @microbatches(%x0: tensor<2x8xf32>, %x1: tensor<2x8xf32>, %y: tensor<2xi64>, %one: tensor<f32>, %n: tensor<f32>) -> (tensor<f32>, tensor<2x8xf32>, tensor<f32>, tensor<2x8xf32>) {
  %l0 = smp.cross_entropy %x0, %y {reduction = #smp<reduction sum>} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
  %d0 = smp.div %l0, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %s = smp.div %one, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %g0 = smp.cross_entropy_grad %x0, %y, %s {reduction = #smp<reduction sum>} : (tensor<2x8xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
  %l1 = smp.cross_entropy %x1, %y {reduction = #smp<reduction sum>} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
  %g1 = smp.cross_entropy_grad %x1, %y, %s {reduction = #smp<reduction sum>} : (tensor<2x8xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
  return %d0, %g0, %l1, %g1 : tensor<f32>, tensor<2x8xf32>, tensor<f32>, tensor<2x8xf32>
}

// -----

// The incoming gradient depends on a value made after the loss (it cannot
// move up), as data parallelism's 1 / all-reduced count does, and the
// loss's division by it comes between the two: the division moves after
// the gradient and the fused op takes the gradient's place. Class
// weights, a per-row (none) loss and ignore_index go with it.
// CHECK-LABEL: func.func @at_grad
// CHECK: %[[T:.*]] = smp.exp %arg3
// CHECK: %[[S:.*]] = smp.mul %[[T]], %arg4
// CHECK: %[[L:.*]], %[[G:.*]] = smp.cross_entropy_with_grad %arg0, %arg1, %[[S]] weights %arg2 {ignore_index = 0 : i64, reduction = #smp<reduction none>} : (tensor<3x5xf32>, tensor<3xi32>, tensor<5xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3x5xf32>)
// CHECK: %[[D:.*]] = smp.div %[[L]], %[[T]]
// CHECK: %[[E:.*]] = smp.neg %[[D]]
// CHECK: return %[[E]], %[[G]]
func.func @at_grad(%x: tensor<3x5xf32>, %y: tensor<3xi32>, %w: tensor<5xf32>, %a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>, tensor<3x5xf32>) {
  %l = smp.cross_entropy %x, %y, %w {ignore_index = 0 : i64, reduction = #smp<reduction none>} : (tensor<3x5xf32>, tensor<3xi32>, tensor<5xf32>) -> tensor<3xf32>
  %t = smp.exp %a : tensor<3xf32>
  %d = smp.div %l, %t : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s = smp.mul %t, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %e = smp.neg %d : tensor<3xf32>
  %g = smp.cross_entropy_grad %x, %y, %s weights %w {ignore_index = 0 : i64, reduction = #smp<reduction none>} : (tensor<3x5xf32>, tensor<3xi32>, tensor<5xf32>, tensor<3xf32>) -> tensor<3x5xf32>
  return %e, %g : tensor<3xf32>, tensor<3x5xf32>
}

// -----

// Left alone: the incoming gradient is made from the loss itself (the
// gradient reads a reader of the loss); other labels; another
// ignore_index; other annotations (another stage).
// CHECK-LABEL: func.func @unfused
// CHECK-NOT: smp.cross_entropy_with_grad
// CHECK-COUNT-4: smp.cross_entropy_grad
func.func @unfused(%x: tensor<2x8xf32>, %y: tensor<2xi64>, %z: tensor<2xi64>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %l = smp.cross_entropy %x, %y : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
  %s = smp.exp %l : tensor<f32>
  %g0 = smp.cross_entropy_grad %x, %y, %s : (tensor<2x8xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
  %g1 = smp.cross_entropy_grad %x, %z, %s : (tensor<2x8xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
  %g2 = smp.cross_entropy_grad %x, %y, %s {ignore_index = 3 : i64} : (tensor<2x8xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
  %l3 = smp.cross_entropy %x, %z {smp.stage = 0 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<f32>
  %g3 = smp.cross_entropy_grad %x, %z, %l3 {smp.stage = 1 : i64} : (tensor<2x8xf32>, tensor<2xi64>, tensor<f32>) -> tensor<2x8xf32>
  return %g0, %g1, %g2, %g3 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
