// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-raise-norms))' | FileCheck %s
// RUN: smp-opt %s -split-input-file -smp-raise | FileCheck %s

// nn.LayerNorm as exported at opset < 17.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[LN:.*]] = smp.layer_norm %[[X]], %[[W]], %[[B]] {axis = 2 : i64, epsilon = 9.99999974E-6 : f32}
// CHECK-NEXT: return %[[LN]]
func.func @layer_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %mean = smp.reduce_mean %x {axes = array<i64: -1>} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %d = smp.sub %x, %mean : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %two = smp.constant dense<2.0> : tensor<f32>
  %sq = smp.pow %d, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %var = smp.reduce_mean %sq {axes = array<i64: -1>} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %eps = smp.constant dense<1.0e-5> : tensor<f32>
  %ve = smp.add %var, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %std = smp.sqrt %ve : tensor<2x4x1xf32>
  %n = smp.div %d, %std : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %y = smp.mul %n, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %z = smp.add %y, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}

// -----

// LLaMA's RMSNorm: x * (1 / sqrt(mean(x^2) + eps)) * w.
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<8xf32>)
// CHECK: %[[R:.*]] = smp.rms_norm %[[X]], %[[W]] {epsilon = 9.99999997E-7 : f32}
// CHECK-NEXT: return %[[R]]
func.func @rms_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = smp.constant dense<2.0> : tensor<f32>
  %sq = smp.pow %x, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %ms = smp.reduce_mean %sq {axes = array<i64: -1>} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %eps = smp.constant dense<1.0e-6> : tensor<f32>
  %a = smp.add %ms, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %s = smp.sqrt %a : tensor<2x4x1xf32>
  %one = smp.constant dense<1.0> : tensor<f32>
  %inv = smp.div %one, %s : (tensor<f32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n = smp.mul %x, %inv : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %y = smp.mul %w, %n : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}

// -----

// The rsqrt spelling with x*x instead of pow.
// CHECK-LABEL: func.func @rms_norm_rsqrt
// CHECK: smp.rms_norm
// CHECK-NOT: smp.rsqrt
func.func @rms_norm_rsqrt(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %sq = smp.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms = smp.reduce_mean %sq {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = smp.constant dense<1.0e-6> : tensor<f32>
  %a = smp.add %eps, %ms : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %inv = smp.rsqrt %a : tensor<4x1xf32>
  %n = smp.mul %inv, %x : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = smp.mul %n, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Negative cases: the mean is over another axis than the normalisation, or
// the partial product is used elsewhere: nothing is rewritten.
// CHECK-LABEL: func.func @not_a_norm
// CHECK-NOT: smp.layer_norm
// CHECK-NOT: smp.rms_norm
func.func @not_a_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = smp.constant dense<2.0> : tensor<f32>
  %sq = smp.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %ms = smp.reduce_mean %sq {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<1x8xf32>
  %eps = smp.constant dense<1.0e-6> : tensor<f32>
  %a = smp.add %ms, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %inv = smp.rsqrt %a : tensor<1x8xf32>
  %n = smp.mul %x, %inv : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %y = smp.mul %n, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y, %n : tensor<4x8xf32>, tensor<4x8xf32>
}
