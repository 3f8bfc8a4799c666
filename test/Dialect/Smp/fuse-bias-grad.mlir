// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-bias-grad))' | FileCheck %s
// The pass: lib/Dialect/Smp/Transforms/FuseBiasGrad.cpp.

// A GPT-2 layer's backward in bf16: the bias gradient's sum comes first, the
// views of g and of the layer's input after it; the fused op sits at the
// sum with both views made again there (annotations kept), the old views
// go, and the sum's readers (its reshape before the product) read it.
// CHECK-LABEL: func.func @linear
// CHECK: %[[G:.*]] = smp.reshape %arg0 {smp.stage = 1 : i64} : tensor<4x32x64xbf16> -> tensor<128x64xbf16>
// CHECK: %[[X:.*]] = smp.reshape %arg1 : tensor<4x32x256xbf16> -> tensor<128x256xbf16>
// CHECK: %[[W:.*]], %[[B:.*]] = smp.matmul_bias_grad %[[G]], %[[X]] {smp.stage = 1 : i64} : (tensor<128x64xbf16>, tensor<128x256xbf16>) -> (tensor<64x256xbf16>, tensor<1x1x64xbf16>)
// CHECK: %[[R:.*]] = smp.reshape %[[B]] : tensor<1x1x64xbf16> -> tensor<64xbf16>
// CHECK-NOT: smp.reduce_sum
// CHECK-NOT: smp.matmul %
// CHECK-NOT: smp.reshape
// CHECK: return %[[R]], %[[W]]
func.func @linear(%g: tensor<4x32x64xbf16>, %x: tensor<4x32x256xbf16>) -> (tensor<64xbf16>, tensor<64x256xbf16>) {
  %s = smp.reduce_sum %g {axes = array<i64: 0, 1>, smp.stage = 1 : i64} : tensor<4x32x64xbf16> -> tensor<1x1x64xbf16>
  %r = smp.reshape %s : tensor<1x1x64xbf16> -> tensor<64xbf16>
  %x2 = smp.reshape %x : tensor<4x32x256xbf16> -> tensor<128x256xbf16>
  %g2 = smp.reshape %g {smp.stage = 1 : i64} : tensor<4x32x64xbf16> -> tensor<128x64xbf16>
  %w = smp.matmul %g2, %x2 {transpose_lhs = true, smp.stage = 1 : i64} : (tensor<128x64xbf16>, tensor<128x256xbf16>) -> tensor<64x256xbf16>
  return %r, %w : tensor<64xbf16>, tensor<64x256xbf16>
}

// -----

// f16, g already [M, N], the product first and a [N] sum after it (without
// keepdims): the fused op sits at the product.
// CHECK-LABEL: func.func @rows
// CHECK: %[[W:.*]], %[[B:.*]] = smp.matmul_bias_grad %arg0, %arg1 : (tensor<16x8xf16>, tensor<16x24xf16>) -> (tensor<8x24xf16>, tensor<8xf16>)
// CHECK: return %[[W]], %[[B]]
func.func @rows(%g: tensor<16x8xf16>, %x: tensor<16x24xf16>) -> (tensor<8x24xf16>, tensor<8xf16>) {
  %w = smp.matmul %g, %x {transpose_lhs = true} : (tensor<16x8xf16>, tensor<16x24xf16>) -> tensor<8x24xf16>
  %s = smp.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : tensor<16x8xf16> -> tensor<8xf16>
  return %w, %s : tensor<8x24xf16>, tensor<8xf16>
}

// -----

// What stays: f32 (the kernels whose bits the CPU reproduces), a sum over
// other dims, a product not transposing g (the input gradient), one
// transposing x too, one with other annotations than the sum, and one
// whose input is computed between the sum and the product.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT: smp.matmul_bias_grad
// CHECK-COUNT-6: smp.reduce_sum
func.func @not_fused(%gf: tensor<16x8xf32>, %xf: tensor<16x24xf32>, %g: tensor<16x8xbf16>, %x: tensor<16x24xbf16>, %xt: tensor<24x16xbf16>, %w8: tensor<8x24xbf16>) -> (tensor<8xf32>, tensor<8x24xf32>, tensor<16xbf16>, tensor<8x24xbf16>, tensor<8xbf16>, tensor<16x24xbf16>, tensor<8xbf16>, tensor<8x24xbf16>, tensor<8xbf16>, tensor<8x24xbf16>, tensor<8xbf16>, tensor<8x24xbf16>) {
  %s0 = smp.reduce_sum %gf {axes = array<i64: 0>, keepdims = false} : tensor<16x8xf32> -> tensor<8xf32>
  %w0 = smp.matmul %gf, %xf {transpose_lhs = true} : (tensor<16x8xf32>, tensor<16x24xf32>) -> tensor<8x24xf32>
  %s1 = smp.reduce_sum %g {axes = array<i64: 1>, keepdims = false} : tensor<16x8xbf16> -> tensor<16xbf16>
  %w1 = smp.matmul %g, %x {transpose_lhs = true, smp.stage = 1 : i64} : (tensor<16x8xbf16>, tensor<16x24xbf16>) -> tensor<8x24xbf16>
  %s2 = smp.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : tensor<16x8xbf16> -> tensor<8xbf16>
  %w2 = smp.matmul %g, %w8 : (tensor<16x8xbf16>, tensor<8x24xbf16>) -> tensor<16x24xbf16>
  %s3 = smp.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : tensor<16x8xbf16> -> tensor<8xbf16>
  %w3 = smp.matmul %g, %xt {transpose_lhs = true, transpose_rhs = true} : (tensor<16x8xbf16>, tensor<24x16xbf16>) -> tensor<8x24xbf16>
  %s4 = smp.reduce_sum %g {axes = array<i64: 0>, keepdims = false, smp.mb = 1 : i64} : tensor<16x8xbf16> -> tensor<8xbf16>
  %w4 = smp.matmul %g, %x {transpose_lhs = true, smp.mb = 2 : i64} : (tensor<16x8xbf16>, tensor<16x24xbf16>) -> tensor<8x24xbf16>
  %s5 = smp.reduce_sum %g {axes = array<i64: 0>, keepdims = false, smp.stage = 2 : i64} : tensor<16x8xbf16> -> tensor<8xbf16>
  %x5 = smp.exp %x : tensor<16x24xbf16>
  %w5 = smp.matmul %g, %x5 {transpose_lhs = true, smp.stage = 2 : i64} : (tensor<16x8xbf16>, tensor<16x24xbf16>) -> tensor<8x24xbf16>
  return %s0, %w0, %s1, %w1, %s2, %w2, %s3, %w3, %s4, %w4, %s5, %w5 : tensor<8xf32>, tensor<8x24xf32>, tensor<16xbf16>, tensor<8x24xbf16>, tensor<8xbf16>, tensor<16x24xbf16>, tensor<8xbf16>, tensor<8x24xbf16>, tensor<8xbf16>, tensor<8x24xbf16>, tensor<8xbf16>, tensor<8x24xbf16>
}
