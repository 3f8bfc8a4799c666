// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-matmul-bias{addend=true}))' | FileCheck %s
// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-matmul-bias))' | FileCheck %s --check-prefix=OFF
// The pass's `addend` option (lib/Dialect/Smp/Transforms/FuseMatMulBias.cpp;
// the training pipeline's default, smpc --no-residual-epilogue leaves it out).

// A transformer's residual connections: x + Linear(h), the bias fused first,
// then the residual (either operand order), as matmul_bias_add in the
// product's place with its discardable attributes. An addend defined after
// the product stays an add: the fused op would have to wait for it, keeping
// the product's operands live until then.
// CHECK-LABEL: func.func @residual
// CHECK: %[[R1:.*]] = smp.matmul_bias_add %arg0, %arg1, %arg2, %arg0 {smp.stage = 1 : i64, transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
// CHECK: %[[R2:.*]] = smp.matmul_bias_add %[[R1]], %arg1, %arg2, %[[R1]] : (tensor<2x16x64xbf16>, tensor<64x64xbf16>, tensor<64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
// CHECK: %[[C:.*]] = smp.matmul_bias %[[R2]], %arg1, %arg2
// CHECK: %[[G:.*]] = smp.gelu %[[R2]]
// CHECK: %[[S:.*]] = smp.add %[[C]], %[[G]]
// CHECK: return %[[S]]
// Without the option only the biases fuse.
// OFF-LABEL: func.func @residual
// OFF-COUNT-3: smp.matmul_bias %
// OFF-NOT: smp.matmul_bias_add
func.func @residual(%x: tensor<2x16x64xbf16>, %w: tensor<64x64xbf16>, %b: tensor<64xbf16>) -> tensor<2x16x64xbf16> {
  %m = smp.matmul %x, %w {transpose_rhs = true, smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<64x64xbf16>) -> tensor<2x16x64xbf16>
  %a = smp.add %m, %b {smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<64xbf16>) -> tensor<2x16x64xbf16>
  %r = smp.add %x, %a {smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  %n = smp.matmul %r, %w : (tensor<2x16x64xbf16>, tensor<64x64xbf16>) -> tensor<2x16x64xbf16>
  %c = smp.add %b, %n : (tensor<64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  %t = smp.add %c, %r : (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  %o = smp.matmul %t, %w : (tensor<2x16x64xbf16>, tensor<64x64xbf16>) -> tensor<2x16x64xbf16>
  %d = smp.add %b, %o : (tensor<64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  %g = smp.gelu %t {approximate = #smp<gelu_approximation tanh>} : tensor<2x16x64xbf16>
  %s = smp.add %d, %g : (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  return %s : tensor<2x16x64xbf16>
}

// -----

// A residual after a Linear without a bias (LLaMA's): add(r, matmul) ->
// matmul_add in the add's place.
// CHECK-LABEL: func.func @no_bias
// CHECK: %[[M:.*]] = smp.matmul_add %arg0, %arg1, %arg0 {transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<64x64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
// CHECK-NOT: smp.add
// CHECK: return %[[M]]
// OFF-LABEL: func.func @no_bias
// OFF: smp.add
func.func @no_bias(%x: tensor<2x16x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<2x16x64xbf16> {
  %m = smp.matmul %x, %w {transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<64x64xbf16>) -> tensor<2x16x64xbf16>
  %r = smp.add %x, %m : (tensor<2x16x64xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  return %r : tensor<2x16x64xbf16>
}

// -----

// What stays an add of a product: a product with another use, an addend
// that broadcasts the product to a larger shape, a second bias (a row
// vector, not the product's type), ops with other annotations, an integer
// product and a matrix-vector product.
// CHECK-LABEL: func.func @not_addend
// CHECK-NOT: smp.matmul_bias_add
// CHECK-NOT: smp.matmul_add
// CHECK-COUNT-7: smp.add
func.func @not_addend(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %r: tensor<4x8xf32>, %wide: tensor<3x4x8xf32>, %i: tensor<4x8xi64>, %iw: tensor<8x8xi64>, %v: tensor<8xf32>, %s4: tensor<4xf32>) -> (tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi64>, tensor<4xf32>) {
  %m0 = smp.matmul_bias %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a0 = smp.add %r, %m0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m1 = smp.matmul_bias %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a1 = smp.add %m1, %wide : (tensor<4x8xf32>, tensor<3x4x8xf32>) -> tensor<3x4x8xf32>
  %m2 = smp.matmul_bias %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a2 = smp.add %m2, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %m3 = smp.matmul_bias %x, %w, %b {smp.stage = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a3 = smp.add %m3, %r {smp.stage = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %m4 = smp.matmul %i, %iw : (tensor<4x8xi64>, tensor<8x8xi64>) -> tensor<4x8xi64>
  %a4 = smp.add %m4, %i : (tensor<4x8xi64>, tensor<4x8xi64>) -> tensor<4x8xi64>
  %m5 = smp.matmul %x, %v : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  %a5 = smp.add %m5, %s4 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %sum = smp.add %a0, %m0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %sum, %a1, %a2, %a3, %a4, %a5 : tensor<4x8xf32>, tensor<3x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xi64>, tensor<4xf32>
}
