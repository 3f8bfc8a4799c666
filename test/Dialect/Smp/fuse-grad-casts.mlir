// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-grad-casts))' | FileCheck %s
// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-grad-casts))' | smp-opt -split-input-file | FileCheck %s

// A bf16 gradient cast up for the gradient norm and the f32 optimizer
// step: both read the bf16 gradient, the cast goes (and the syntax names
// the gradient's type, which round-trips).
// CHECK-LABEL: func.func @step
// CHECK-NOT: smp.cast
// CHECK: %[[N:.*]] = smp.sum_squares %arg1, %arg2 : (tensor<4x8xbf16>, tensor<8xf16>) -> tensor<f32>
// CHECK: smp.adam_update %arg0, %arg1, %arg3, %arg4, %arg5, %arg5 : tensor<4x8xf32>, tensor<f32> grad tensor<4x8xbf16>
func.func @step(%p: tensor<4x8xf32>, %g: tensor<4x8xbf16>, %h: tensor<8xf16>, %m: tensor<4x8xf32>, %v: tensor<4x8xf32>, %lr: tensor<f32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %gw = smp.cast %g : tensor<4x8xbf16> to tensor<4x8xf32>
  %hw = smp.cast %h : tensor<8xf16> to tensor<8xf32>
  %n = smp.sum_squares %gw, %hw : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<f32>
  %np, %nm, %nv = smp.adam_update %p, %gw, %m, %v, %lr, %lr : tensor<4x8xf32>, tensor<f32>
  return %n, %np : tensor<f32>, tensor<4x8xf32>
}

// -----

// The SGD step reads a 16-bit gradient too.
// CHECK-LABEL: func.func @sgd
// CHECK-NOT: smp.cast
// CHECK: smp.sgd_update %arg0, %arg1, %arg0, %arg2, %arg2 {momentum = 0.899999976 : f32} : tensor<8xf32>, tensor<f32> grad tensor<8xbf16>
func.func @sgd(%p: tensor<8xf32>, %g: tensor<8xbf16>, %lr: tensor<f32>) -> tensor<8xf32> {
  %gw = smp.cast %g : tensor<8xbf16> to tensor<8xf32>
  %sp, %sb = smp.sgd_update %p, %gw, %p, %lr, %lr {momentum = 0.9 : f32} : tensor<8xf32>, tensor<f32>
  return %sp : tensor<8xf32>
}

// -----

// What stays: a cast with another use (a mul), the optimizer reading the
// widened value as something other than the gradient, a cast that narrows.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: smp.cast
// CHECK-NOT: grad tensor
func.func @kept(%p: tensor<8xf32>, %g: tensor<8xbf16>, %k: tensor<8xbf16>, %lr: tensor<f32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>) {
  %gw = smp.cast %g : tensor<8xbf16> to tensor<8xf32>
  %n = smp.sum_squares %gw : (tensor<8xf32>) -> tensor<f32>
  %r = smp.mul %gw, %gw : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %kw = smp.cast %k : tensor<8xbf16> to tensor<8xf32>
  %np, %nm, %nv = smp.adam_update %p, %kw, %kw, %kw, %lr, %lr : tensor<8xf32>, tensor<f32>
  %down = smp.cast %p : tensor<8xf32> to tensor<8xbf16>
  return %r, %np, %down : tensor<8xf32>, tensor<8xf32>, tensor<8xbf16>
}
