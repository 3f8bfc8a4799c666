// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-matmul-bias))' | FileCheck %s
// The pass: lib/Dialect/Smp/Transforms/FuseMatMulBias.cpp.

// nn.Linear's forward: the bias added to the product (either operand order,
// [N] or [1, 1, N], transposed weights) becomes one matmul_bias; the
// product's discardable attributes go with it.
// CHECK-LABEL: func.func @linear
// CHECK: %[[A:.*]] = smp.matmul_bias %arg0, %arg1, %arg2 {smp.stage = 1 : i64, transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<256x64xbf16>, tensor<256xbf16>) -> tensor<2x16x256xbf16>
// CHECK: %[[G:.*]] = smp.gelu %[[A]]
// CHECK: %[[B:.*]] = smp.matmul_bias %[[G]], %arg3, %arg4 : (tensor<2x16x256xbf16>, tensor<256x64xbf16>, tensor<1x1x64xbf16>) -> tensor<2x16x64xbf16>
// CHECK-NOT: smp.add
// CHECK-NOT: smp.matmul %
// CHECK: return %[[B]]
func.func @linear(%x: tensor<2x16x64xbf16>, %w1: tensor<256x64xbf16>, %b1: tensor<256xbf16>, %w2: tensor<256x64xbf16>, %b2: tensor<1x1x64xbf16>) -> tensor<2x16x64xbf16> {
  %m = smp.matmul %x, %w1 {transpose_rhs = true, smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<256x64xbf16>) -> tensor<2x16x256xbf16>
  %a = smp.add %b1, %m : (tensor<256xbf16>, tensor<2x16x256xbf16>) -> tensor<2x16x256xbf16>
  %g = smp.gelu %a {approximate = #smp<gelu_approximation tanh>} : tensor<2x16x256xbf16>
  %n = smp.matmul %g, %w2 : (tensor<2x16x256xbf16>, tensor<256x64xbf16>) -> tensor<2x16x64xbf16>
  %b = smp.add %n, %b2 : (tensor<2x16x64xbf16>, tensor<1x1x64xbf16>) -> tensor<2x16x64xbf16>
  return %b : tensor<2x16x64xbf16>
}

// -----

// Where the fused op goes: at the product when the bias is made before it
// (x and w live no longer than they did), so an op between the product and
// the add now comes after it; at the add when the bias is made between
// them.
// CHECK-LABEL: func.func @placement
// CHECK: %[[T:.*]] = smp.tanh %arg0
// CHECK-NEXT: %[[P:.*]] = smp.matmul_bias %arg0, %arg1, %arg2
// CHECK-NEXT: %[[C:.*]] = smp.tanh %arg2
// CHECK-NEXT: %[[Q:.*]] = smp.matmul_bias %[[T]], %arg1, %[[C]]
// CHECK-NEXT: return %[[P]], %[[Q]]
func.func @placement(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %t = smp.tanh %x : tensor<4x8xf32>
  %m0 = smp.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %m1 = smp.matmul %t, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %c = smp.tanh %b : tensor<8xf32>
  %a0 = smp.add %m0, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a1 = smp.add %m1, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %a0, %a1 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// What stays an add: a product with another use (the training step saves
// it), a residual (not a row bias), a bias that broadcasts the product to
// a larger shape, a column bias ([M, 1]),
// a product with a rank-1 rhs (a matrix-vector product has no columns),
// an integer product.
// CHECK-LABEL: func.func @not_bias
// CHECK-NOT: smp.matmul_bias
// CHECK-COUNT-7: smp.add
func.func @not_bias(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %r: tensor<4x8xf32>, %wide: tensor<3x4x8xf32>, %col: tensor<4x1xf32>, %v: tensor<8xf32>, %s5: tensor<4xf32>, %i: tensor<4x8xi64>, %iw: tensor<8x8xi64>, %ib: tensor<8xi64>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xi64>) {
  %m0 = smp.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a0 = smp.add %b, %m0 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m1 = smp.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a1 = smp.add %m1, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m2 = smp.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a2 = smp.add %m2, %wide : (tensor<4x8xf32>, tensor<3x4x8xf32>) -> tensor<3x4x8xf32>
  %m4 = smp.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a4 = smp.add %m4, %col : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %m5 = smp.matmul %x, %v : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  %a5 = smp.add %m5, %s5 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %m6 = smp.matmul %i, %iw : (tensor<4x8xi64>, tensor<8x8xi64>) -> tensor<4x8xi64>
  %a6 = smp.add %m6, %ib : (tensor<4x8xi64>, tensor<8xi64>) -> tensor<4x8xi64>
  %sum = smp.add %a0, %m0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %sum, %a1, %a2, %a4, %a5, %a6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4x8xi64>
}
