// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-matmul-bias{addend=true}))' | FileCheck %s
// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-matmul-bias))' | FileCheck %s --check-prefix=OFF
// The pass's `addend` option (lib/Dialect/Smp/Transforms/FuseMatMulBias.cpp;
// the training pipeline's default, smpc --no-residual-epilogue leaves it out).

// A transformer's residual connections: x + Linear(h), the bias fused first,
// then the residual (either operand order; one defined after the product:
// the fused op goes to the add's place), as matmul_bias_add with the
// product's discardable attributes.
// CHECK-LABEL: func.func @residual
// CHECK: %[[R1:.*]] = smp.matmul_bias_add %arg0, %arg1, %arg2, %arg0 {smp.stage = 1 : i64, transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
// CHECK: %[[G:.*]] = smp.gelu %arg0
// CHECK: %[[R2:.*]] = smp.matmul_bias_add %[[R1]], %arg1, %arg2, %[[G]] : (tensor<2x16x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
// CHECK-NOT: smp.add
// CHECK: return %[[R2]]
// Without the option only the biases fuse.
// OFF-LABEL: func.func @residual
// OFF-COUNT-2: smp.matmul_bias %
// OFF-NOT: smp.matmul_bias_add
func.func @residual(%x: tensor<2x16x64xbf16>, %w: tensor<64x64xbf16>, %b: tensor<64xbf16>) -> tensor<2x16x64xbf16> {
  %m = smp.matmul %x, %w {transpose_rhs = true, smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<64x64xbf16>) -> tensor<2x16x64xbf16>
  %a = smp.add %m, %b {smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<64xbf16>) -> tensor<2x16x64xbf16>
  %r = smp.add %x, %a {smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  %n = smp.matmul %r, %w : (tensor<2x16x64xbf16>, tensor<64x64xbf16>) -> tensor<2x16x64xbf16>
  %c = smp.add %b, %n : (tensor<64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  %g = smp.gelu %x {approximate = #smp<gelu_approximation tanh>} : tensor<2x16x64xbf16>
  %s = smp.add %c, %g : (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  return %s : tensor<2x16x64xbf16>
}

// -----

// What stays an add of a matmul_bias: a product with another use, an
// addend that broadcasts the product to a larger shape, a second bias (a
// row vector, not the product's type), ops with other annotations, and a
// product without a bias (a residual after a bias-free Linear).
// CHECK-LABEL: func.func @not_addend
// CHECK-NOT: smp.matmul_bias_add
// CHECK-COUNT-6: smp.add
func.func @not_addend(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %r: tensor<4x8xf32>, %wide: tensor<3x4x8xf32>) -> (tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %m0 = smp.matmul_bias %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a0 = smp.add %r, %m0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m1 = smp.matmul_bias %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a1 = smp.add %m1, %wide : (tensor<4x8xf32>, tensor<3x4x8xf32>) -> tensor<3x4x8xf32>
  %m2 = smp.matmul_bias %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a2 = smp.add %m2, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %m3 = smp.matmul_bias %x, %w, %b {smp.stage = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a3 = smp.add %m3, %r {smp.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m4 = smp.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a4 = smp.add %m4, %r : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sum = smp.add %a0, %m0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %sum, %a1, %a2, %a3, %a4 : tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
