// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-loss-casts))' | FileCheck %s

// A bf16 model's loss (smp-mixed-precision casts the logits up to f32) and
// the logits' gradient (cast back down): both read the bf16 logits, the
// loss stays f32, the gradient is bf16, and neither f32 copy is left.
// CHECK-LABEL: func.func @bf16_loss
// CHECK-NOT: smp.cast
// CHECK: %[[L:.*]] = smp.cross_entropy %arg0, %arg1 {smp.stage = 0 : i64} : (tensor<4x8x32xbf16>, tensor<4x8xi64>) -> tensor<f32>
// CHECK: %[[G:.*]] = smp.cross_entropy_grad %arg0, %arg1, %arg2 {smp.stage = 0 : i64} : (tensor<4x8x32xbf16>, tensor<4x8xi64>, tensor<f32>) -> tensor<4x8x32xbf16>
// CHECK-NOT: smp.cast
// CHECK: return %[[L]], %[[G]]
func.func @bf16_loss(%x: tensor<4x8x32xbf16>, %y: tensor<4x8xi64>, %one: tensor<f32>) -> (tensor<f32>, tensor<4x8x32xbf16>) {
  %w = smp.cast %x : tensor<4x8x32xbf16> to tensor<4x8x32xf32>
  %l = smp.cross_entropy %w, %y {smp.stage = 0 : i64} : (tensor<4x8x32xf32>, tensor<4x8xi64>) -> tensor<f32>
  %g = smp.cross_entropy_grad %w, %y, %one {smp.stage = 0 : i64} : (tensor<4x8x32xf32>, tensor<4x8xi64>, tensor<f32>) -> tensor<4x8x32xf32>
  %d = smp.cast %g : tensor<4x8x32xf32> to tensor<4x8x32xbf16>
  return %l, %d : tensor<f32>, tensor<4x8x32xbf16>
}

// -----

// An evaluation's label ranks (--eval-accuracy) read the bf16 logits too:
// no f32 copy is kept for them alone.
// CHECK-LABEL: func.func @bf16_rank
// CHECK-NOT: smp.cast
// CHECK: smp.label_rank %arg0, %arg1, %arg2 {classes = 32 : i64} : (tensor<4x8x32xbf16>, tensor<4x8xi64>, tensor<i64>) -> tensor<4x8xf32>
// CHECK: smp.cross_entropy %arg0, %arg1 : (tensor<4x8x32xbf16>, tensor<4x8xi64>) -> tensor<f32>
func.func @bf16_rank(%x: tensor<4x8x32xbf16>, %y: tensor<4x8xi64>, %o: tensor<i64>) -> (tensor<f32>, tensor<4x8xf32>) {
  %w = smp.cast %x : tensor<4x8x32xbf16> to tensor<4x8x32xf32>
  %r = smp.label_rank %w, %y, %o {classes = 32 : i64} : (tensor<4x8x32xf32>, tensor<4x8xi64>, tensor<i64>) -> tensor<4x8xf32>
  %l = smp.cross_entropy %w, %y : (tensor<4x8x32xf32>, tensor<4x8xi64>) -> tensor<f32>
  return %l, %r : tensor<f32>, tensor<4x8xf32>
}

// -----

// f16 logits whose f32 copy is also a result: the loss and the gradient
// read the f16 logits, the cast stays for the result; a per-token loss.
// CHECK-LABEL: func.func @f16_shared
// CHECK: %[[W:.*]] = smp.cast %arg0 : tensor<2x16xf16> to tensor<2x16xf32>
// CHECK: smp.cross_entropy %arg0, %arg1 {reduction = #smp<reduction none>} : (tensor<2x16xf16>, tensor<2xi64>) -> tensor<2xf32>
// CHECK: smp.cross_entropy_grad %arg0, %arg1, %arg2 {reduction = #smp<reduction none>} : (tensor<2x16xf16>, tensor<2xi64>, tensor<2xf32>) -> tensor<2x16xf16>
func.func @f16_shared(%x: tensor<2x16xf16>, %y: tensor<2xi64>, %dl: tensor<2xf32>) -> (tensor<2xf32>, tensor<2x16xf16>, tensor<2x16xf32>) {
  %w = smp.cast %x : tensor<2x16xf16> to tensor<2x16xf32>
  %l = smp.cross_entropy %w, %y {reduction = #smp<reduction none>} : (tensor<2x16xf32>, tensor<2xi64>) -> tensor<2xf32>
  %g = smp.cross_entropy_grad %w, %y, %dl {reduction = #smp<reduction none>} : (tensor<2x16xf32>, tensor<2xi64>, tensor<2xf32>) -> tensor<2x16xf32>
  %d = smp.cast %g : tensor<2x16xf32> to tensor<2x16xf16>
  return %l, %d, %w : tensor<2xf32>, tensor<2x16xf16>, tensor<2x16xf32>
}

// -----

// What keeps its casts: class weights (of the f32 logits' type), an f32
// gradient with another use, a gradient cast to another type than the
// logits', logits widened from f64 (not a 16-bit type).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: smp.cross_entropy{{.*}}xf32>, tensor<4xi64>
// CHECK-NOT: smp.cross_entropy
func.func @kept(%x: tensor<4x8xbf16>, %y: tensor<4xi64>, %cw: tensor<8xf32>, %one: tensor<f32>, %z: tensor<4x8xf64>) -> (tensor<f32>, tensor<4x8xbf16>, tensor<4x8xf16>, tensor<4x8xf32>, tensor<4x8xbf16>, tensor<f32>) {
  %w = smp.cast %x : tensor<4x8xbf16> to tensor<4x8xf32>
  %l = smp.cross_entropy %w, %y, %cw : (tensor<4x8xf32>, tensor<4xi64>, tensor<8xf32>) -> tensor<f32>
  %g = smp.cross_entropy_grad %w, %y, %one weights %cw : (tensor<4x8xf32>, tensor<4xi64>, tensor<8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %d = smp.cast %g : tensor<4x8xf32> to tensor<4x8xbf16>
  %g2 = smp.cross_entropy_grad %w, %y, %one : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  %d2 = smp.cast %g2 : tensor<4x8xf32> to tensor<4x8xf16>
  %g3 = smp.cross_entropy_grad %w, %y, %one : (tensor<4x8xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x8xf32>
  %d3 = smp.cast %g3 : tensor<4x8xf32> to tensor<4x8xbf16>
  %v = smp.cast %z : tensor<4x8xf64> to tensor<4x8xf32>
  %l2 = smp.cross_entropy %v, %y : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l, %d, %d2, %g3, %d3, %l2 : tensor<f32>, tensor<4x8xbf16>, tensor<4x8xf16>, tensor<4x8xf32>, tensor<4x8xbf16>, tensor<f32>
}
