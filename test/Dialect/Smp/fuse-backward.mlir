// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-backward))' | FileCheck %s

// The bias gradient after a GELU gradient (keepdims, then [N] as the
// autodiff writes it) folds into bias_gelu_grad; the GELU gradient's other
// users read its first result.
// CHECK-LABEL: func.func @bias_gelu
// CHECK: %[[DX:.*]], %[[DB:.*]] = smp.bias_gelu_grad %arg0, %arg1 {approximate = #smp<gelu_approximation tanh>} : tensor<2x16x256xf32> -> tensor<1x1x256xf32>
// CHECK-NOT: smp.gelu_grad
// CHECK-NOT: smp.reduce_sum
// CHECK: %[[B:.*]] = smp.reshape %[[DB]] : tensor<1x1x256xf32> -> tensor<256xf32>
// CHECK: %[[M:.*]] = smp.matmul %[[DX]], %arg2
// CHECK: return %[[B]], %[[M]]
func.func @bias_gelu(%x: tensor<2x16x256xf32>, %dy: tensor<2x16x256xf32>, %w: tensor<256x64xf32>) -> (tensor<256xf32>, tensor<2x16x64xf32>) {
  %g = smp.gelu_grad %x, %dy {approximate = #smp<gelu_approximation tanh>} : tensor<2x16x256xf32>
  %s = smp.reduce_sum %g {axes = array<i64: 0, 1>} : tensor<2x16x256xf32> -> tensor<1x1x256xf32>
  %b = smp.reshape %s : tensor<1x1x256xf32> -> tensor<256xf32>
  %m = smp.matmul %g, %w : (tensor<2x16x256xf32>, tensor<256x64xf32>) -> tensor<2x16x64xf32>
  return %b, %m : tensor<256xf32>, tensor<2x16x64xf32>
}

// -----

// Without keepdims, negative axes in any order, the exact GELU.
// CHECK-LABEL: func.func @bias_gelu_flat
// CHECK: %{{.*}}, %[[DB:.*]] = smp.bias_gelu_grad %arg0, %arg1 : tensor<8x32xf32> -> tensor<32xf32>
// CHECK: return %[[DB]]
func.func @bias_gelu_flat(%x: tensor<8x32xf32>, %dy: tensor<8x32xf32>) -> tensor<32xf32> {
  %g = smp.gelu_grad %x, %dy : tensor<8x32xf32>
  %s = smp.reduce_sum %g {axes = array<i64: -2>, keepdims = false} : tensor<8x32xf32> -> tensor<32xf32>
  return %s : tensor<32xf32>
}

// -----

// Sums that are not a bias gradient stay: over the last dim, over only some
// leading dims, of a rank-1 gradient.
// CHECK-LABEL: func.func @not_bias
// CHECK-NOT: smp.bias_gelu_grad
// CHECK-COUNT-3: smp.reduce_sum
func.func @not_bias(%x: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>, %v: tensor<8xf32>) -> (tensor<2x4x1xf32>, tensor<1x4x8xf32>, tensor<1xf32>) {
  %g = smp.gelu_grad %x, %dy : tensor<2x4x8xf32>
  %a = smp.reduce_sum %g {axes = array<i64: 2>} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %b = smp.reduce_sum %g {axes = array<i64: 0>} : tensor<2x4x8xf32> -> tensor<1x4x8xf32>
  %h = smp.gelu_grad %v, %v : tensor<8xf32>
  %c = smp.reduce_sum %h {axes = array<i64: 0>} : tensor<8xf32> -> tensor<1xf32>
  return %a, %b, %c : tensor<2x4x1xf32>, tensor<1x4x8xf32>, tensor<1xf32>
}

// -----

// The residual stream's gradient added to a norm's input gradient becomes
// the norm gradient's residual (either operand order); its other results
// keep their users.
// CHECK-LABEL: func.func @residual
// CHECK: %[[G1:.*]], %[[S1:.*]], %[[B1:.*]] = smp.layer_norm_grad %arg0, %arg1, %arg2 residual %arg3 {axis = 2 : i64
// CHECK: %[[G2:.*]], %[[S2:.*]] = smp.rms_norm_grad %arg0, %arg1, %arg2 residual %[[G1]] {epsilon
// CHECK-NOT: smp.add
// CHECK: return %[[G2]], %[[S1]], %[[B1]], %[[S2]]
func.func @residual(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %dy: tensor<2x4x8xf32>, %r: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %g, %s, %b = smp.layer_norm_grad %x, %w, %dy {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %a = smp.add %r, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g2, %s2 = smp.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-6 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %a2 = smp.add %g2, %a : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %a2, %s, %b, %s2 : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Adds that stay: the input gradient has another use; the add broadcasts;
// the residual is made after the norm gradient (the fused op could not sit
// where the norm gradient is).
// CHECK-LABEL: func.func @residual_stays
// CHECK-NOT: residual
// CHECK-COUNT-3: smp.add
func.func @residual_stays(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %dy: tensor<2x4x8xf32>, %r: tensor<2x4x8xf32>, %v: tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) {
  %g, %s, %b = smp.layer_norm_grad %x, %w, %dy {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %a = smp.add %r, %g : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %g2, %s2 = smp.rms_norm_grad %x, %w, %dy {epsilon = 1.0e-6 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %a2 = smp.add %g2, %v : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %g3, %s3 = smp.rms_norm_grad %x, %w, %r {epsilon = 1.0e-6 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  %late = smp.mul %r, %r : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %a3 = smp.add %late, %g3 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %a, %g, %a2, %a3, %s3 : tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>
}

// -----

// A sum over the tp ranks of which each keeps its rows (the gradient of a
// sequence-parallel region's entry: tp_copy after all_gather) becomes one
// reduce_scatter, also through a reshape between them; its marks are kept.
// A sum with another user, or over other ranks than the slice, stays.
// CHECK-LABEL: func.func @reduce_scatter
// CHECK: %[[RS:.*]] = shard.reduce_scatter %arg0 on @tp grid_axes = [0] scatter_axis = 0 {smp.bwd} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: %[[V:.*]] = smp.reshape %arg1 {smp.bwd} : tensor<2x4x4xf32> -> tensor<8x4xf32>
// CHECK: %[[RS2:.*]] = shard.reduce_scatter %[[V]] on @tp grid_axes = [0] scatter_axis = 0 {smp.bwd} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: %[[AR:.*]] = shard.all_reduce %arg0 on @tp
// CHECK: %[[SL:.*]] = shard.all_slice %[[AR]] on @tp
// CHECK: %[[AR2:.*]] = shard.all_reduce %arg0 on @dp
// CHECK: shard.all_slice %[[AR2]] on @tp
// CHECK-NOT: shard.all_reduce
// CHECK: return %[[RS]], %[[RS2]], %[[SL]], %[[AR]]
shard.grid @tp(shape = 2)
shard.grid @dp(shape = 2)
func.func @reduce_scatter(%x: tensor<8x4xf32>, %y: tensor<2x4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>) {
  %s = shard.all_reduce %x on @tp grid_axes = [0] {smp.bwd} : tensor<8x4xf32> -> tensor<8x4xf32>
  %a = shard.all_slice %s on @tp grid_axes = [0] slice_axis = 0 {smp.bwd} : tensor<8x4xf32> -> tensor<4x4xf32>
  %t = shard.all_reduce %y on @tp grid_axes = [0] {smp.bwd} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %v = smp.reshape %t {smp.bwd} : tensor<2x4x4xf32> -> tensor<8x4xf32>
  %b = shard.all_slice %v on @tp grid_axes = [0] slice_axis = 0 {smp.bwd} : tensor<8x4xf32> -> tensor<4x4xf32>
  %u = shard.all_reduce %x on @tp grid_axes = [0] : tensor<8x4xf32> -> tensor<8x4xf32>
  %c = shard.all_slice %u on @tp grid_axes = [0] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %w = shard.all_reduce %x on @dp grid_axes = [0] : tensor<8x4xf32> -> tensor<8x4xf32>
  %d = shard.all_slice %w on @tp grid_axes = [0] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  return %a, %b, %c, %u, %d : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<8x4xf32>, tensor<4x4xf32>
}

// -----

// Gathering the parts an all_slice cut gives its input back (the same on
// every rank); over other ranks, or along another axis, it stays.
// CHECK-LABEL: func.func @gather_of_slice
// CHECK: %[[SL:.*]] = shard.all_slice %arg0 on @tp grid_axes = [0] slice_axis = 1
// CHECK: %[[G:.*]] = shard.all_gather %[[SL]] on @tp grid_axes = [0] gather_axis = 0
// CHECK: return %arg0, %[[G]]
shard.grid @tp(shape = 2)
func.func @gather_of_slice(%x: tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<16x2xf32>) {
  %s = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
  %g = shard.all_gather %s on @tp grid_axes = [0] gather_axis = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
  %t = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 1 : tensor<8x4xf32> -> tensor<8x2xf32>
  %h = shard.all_gather %t on @tp grid_axes = [0] gather_axis = 0 : tensor<8x2xf32> -> tensor<16x2xf32>
  return %g, %h : tensor<8x4xf32>, tensor<16x2xf32>
}
