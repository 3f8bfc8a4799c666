// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-sum-squares))' | FileCheck %s

// The gradient norm's chain (one mul, reduce_sum and add per gradient)
// becomes one sum_squares of the gradients in the chain's order; what
// follows the sum (the collective, the sqrt) is untouched.
// CHECK-LABEL: func.func @norm
// CHECK: %[[S:.*]] = smp.sum_squares %arg0, %arg1, %arg2 : (tensor<4x8xf32>, tensor<8xf32>, tensor<f32>) -> tensor<f32>
// CHECK-NOT: smp.mul
// CHECK-NOT: smp.reduce_sum
// CHECK: %[[R:.*]] = smp.sqrt %[[S]]
// CHECK: return %[[R]]
func.func @norm(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<f32>) -> tensor<f32> {
  %a2 = smp.mul %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sa = smp.reduce_sum %a2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
  %b2 = smp.mul %b, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %sb = smp.reduce_sum %b2 {axes = array<i64: 0>, keepdims = false} : tensor<8xf32> -> tensor<f32>
  %ab = smp.add %sa, %sb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %c2 = smp.mul %c, %c : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %sc = smp.reduce_sum %c2 {axes = array<i64>, keepdims = false} : tensor<f32> -> tensor<f32>
  %abc = smp.add %ab, %sc : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %r = smp.sqrt %abc : tensor<f32>
  return %r : tensor<f32>
}

// -----

// What stays: a partial sum that meets a collective (only the terms on
// each side of it fuse), a square whose mul has another use, a product of
// two different tensors, a sum over some dims, bf16 squares.
// CHECK-LABEL: func.func @kept
// CHECK: %[[P:.*]] = smp.sum_squares %arg0, %arg1
// CHECK: %[[AR:.*]] = shard.all_reduce %[[P]] on @tp
// CHECK-COUNT-4: smp.reduce_sum
// CHECK-NOT: smp.sum_squares
module {
  shard.grid @tp(shape = 2)
  func.func @kept(%a: tensor<8xf32>, %b: tensor<8xf32>, %c: tensor<8xf32>, %d: tensor<2x8xf32>, %e: tensor<8xbf16>) -> (tensor<f32>, tensor<8xf32>, tensor<f32>, tensor<f32>, tensor<1x8xf32>, tensor<bf16>) {
    %a2 = smp.mul %a, %a : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %sa = smp.reduce_sum %a2 {axes = array<i64: 0>, keepdims = false} : tensor<8xf32> -> tensor<f32>
    %b2 = smp.mul %b, %b : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %sb = smp.reduce_sum %b2 {axes = array<i64: 0>, keepdims = false} : tensor<8xf32> -> tensor<f32>
    %ab = smp.add %sa, %sb : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %ar = shard.all_reduce %ab on @tp grid_axes = [0] : tensor<f32> -> tensor<f32>
    %c2 = smp.mul %c, %c : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %sc = smp.reduce_sum %c2 {axes = array<i64: 0>, keepdims = false} : tensor<8xf32> -> tensor<f32>
    %t = smp.add %ar, %sc : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %ac = smp.mul %a, %c : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %sac = smp.reduce_sum %ac {axes = array<i64: 0>, keepdims = false} : tensor<8xf32> -> tensor<f32>
    %d2 = smp.mul %d, %d : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %sd = smp.reduce_sum %d2 {axes = array<i64: 0>} : tensor<2x8xf32> -> tensor<1x8xf32>
    %e2 = smp.mul %e, %e : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
    %se = smp.reduce_sum %e2 {axes = array<i64: 0>, keepdims = false} : tensor<8xbf16> -> tensor<bf16>
    return %t, %c2, %sac, %sac, %sd, %se : tensor<f32>, tensor<8xf32>, tensor<f32>, tensor<f32>, tensor<1x8xf32>, tensor<bf16>
  }
}
