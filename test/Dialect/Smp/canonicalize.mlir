// RUN: smp-opt %s -canonicalize -split-input-file | FileCheck %s

// Shape arithmetic folds to one constant.
// CHECK-LABEL: func.func @shape_math
// CHECK-NEXT: %[[C:.*]] = smp.constant dense<[2, 4, 16, 8]> : tensor<4xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_math() -> tensor<4xi64> {
  %shape = smp.constant dense<[2, 16, 32]> : tensor<3xi64>
  %i0 = smp.constant dense<[0]> : tensor<1xi64>
  %i1 = smp.constant dense<[1]> : tensor<1xi64>
  %b = smp.gather %shape, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %t = smp.gather %shape, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %heads = smp.constant dense<[4]> : tensor<1xi64>
  %c = smp.constant dense<[32]> : tensor<1xi64>
  %hd = smp.div %c, %heads : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %r = smp.concat %b, %heads, %t, %hd {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  return %r : tensor<4xi64>
}

// -----

// A large splat stays a splat: expand, compare and cast of a splat fold at any
// size without materialising elements.
// CHECK-LABEL: func.func @big_splat
// CHECK-NEXT: %[[C:.*]] = smp.constant dense<true> : tensor<1024x1024xi1>
// CHECK-NEXT: return %[[C]]
func.func @big_splat() -> tensor<1024x1024xi1> {
  %z = smp.constant dense<0.0> : tensor<1x1xf32>
  %e = smp.expand %z : tensor<1x1xf32> -> tensor<1024x1024xf32>
  %zero = smp.constant dense<0.0> : tensor<f32>
  %eq = smp.equal %e, %zero : (tensor<1024x1024xf32>, tensor<f32>) -> tensor<1024x1024xi1>
  return %eq : tensor<1024x1024xi1>
}

// -----

// Non-splat constants above 65536 elements are not folded (the IR stays small).
// CHECK-LABEL: func.func @big_non_splat
// CHECK: smp.trilu
func.func @big_non_splat() -> tensor<512x512xf32> {
  %one = smp.constant dense<1.0> : tensor<512x512xf32>
  %t = smp.trilu %one {upper = false, k = 0 : i64} : tensor<512x512xf32>
  return %t : tensor<512x512xf32>
}

// -----

// Integer division by zero is left for the runtime to report.
// CHECK-LABEL: func.func @div_zero
// CHECK: smp.div
func.func @div_zero() -> tensor<i64> {
  %a = smp.constant dense<4> : tensor<i64>
  %z = smp.constant dense<0> : tensor<i64>
  %r = smp.div %a, %z : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %r : tensor<i64>
}

// -----

// No-op data movement folds away; casts to the same type vanish.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identities(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = smp.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = smp.transpose %0 {perm = array<i64: 0, 1>} : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = smp.slice %1 {starts = array<i64: 0, 0>, limits = array<i64: 2, 3>, steps = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = smp.cast %2 : tensor<2x3xf32> to tensor<2x3xf32>
  %4 = smp.concat %3 {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %4 : tensor<2x3xf32>
}

// -----

// A cast to the same type marked smp.no_grad stops a gradient (PyTorch's
// detach, from the importer): it stays until smp-build-gradients removes it.
// CHECK-LABEL: func.func @stop_gradient
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[S:.*]] = smp.cast %[[X]] {smp.no_grad} : tensor<2x3xf32> to tensor<2x3xf32>
// CHECK-NEXT: return %[[S]]
func.func @stop_gradient(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = smp.cast %x {smp.no_grad} : tensor<2x3xf32> to tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Float to int casts truncate toward zero; to bool test for non-zero.
// CHECK-LABEL: func.func @casts
// CHECK-DAG: smp.constant dense<[-1, 2, 0]> : tensor<3xi64>
// CHECK-DAG: smp.constant dense<[true, true, false]> : tensor<3xi1>
func.func @casts() -> (tensor<3xi64>, tensor<3xi1>) {
  %f = smp.constant dense<[-1.7, 2.9, 0.0]> : tensor<3xf32>
  %i = smp.cast %f : tensor<3xf32> to tensor<3xi64>
  %b = smp.cast %f : tensor<3xf32> to tensor<3xi1>
  return %i, %b : tensor<3xi64>, tensor<3xi1>
}

// -----

// Where and a causal mask built from constants.
// CHECK-LABEL: func.func @mask
// CHECK-NEXT: smp.constant dense<{{\[}}[0.000000e+00, -1.000000e+04, -1.000000e+04], [0.000000e+00, 0.000000e+00, -1.000000e+04], [0.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<3x3xf32>
func.func @mask() -> tensor<3x3xf32> {
  %ones = smp.constant dense<1.0> : tensor<3x3xf32>
  %tril = smp.trilu %ones {upper = false, k = 0 : i64} : tensor<3x3xf32>
  %zero = smp.constant dense<0.0> : tensor<f32>
  %keep = smp.greater %tril, %zero : (tensor<3x3xf32>, tensor<f32>) -> tensor<3x3xi1>
  %neg = smp.constant dense<-1.0e4> : tensor<f32>
  %r = smp.where %keep, %zero, %neg : (tensor<3x3xi1>, tensor<f32>, tensor<f32>) -> tensor<3x3xf32>
  return %r : tensor<3x3xf32>
}

// -----

// A transpose of a matrix product's operand (its last two dims) becomes the
// operand's transpose flag; a flag already set flips back; other
// permutations stay.
// CHECK-LABEL: func.func @matmul_transposed_operands
// CHECK-SAME: (%[[X:.*]]: tensor<2x4x8xf32>, %[[W:.*]]: tensor<16x8xf32>, %[[V:.*]]: tensor<8x16xf32>, %[[Y:.*]]: tensor<2x8x4xf32>, %[[U:.*]]: tensor<4x16xf32>)
// CHECK-NEXT: %[[A:.*]] = smp.matmul %[[X]], %[[W]] {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[B:.*]] = smp.matmul %[[X]], %[[V]] : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[C:.*]] = smp.matmul %[[Y]], %[[V]] {transpose_lhs = true} : (tensor<2x8x4xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[P:.*]] = smp.transpose %[[Y]] {perm = array<i64: 1, 0, 2>}
// CHECK-NEXT: smp.matmul %[[P]], %[[U]]
func.func @matmul_transposed_operands(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %v: tensor<8x16xf32>, %y: tensor<2x8x4xf32>, %u: tensor<4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8x2x16xf32>) {
  %wt = smp.transpose %w {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %a = smp.matmul %x, %wt : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %vt = smp.transpose %v {perm = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %b = smp.matmul %x, %vt {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %yt = smp.transpose %y {perm = array<i64: 0, 2, 1>} : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
  %c = smp.matmul %yt, %v : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %p = smp.transpose %y {perm = array<i64: 1, 0, 2>} : tensor<2x8x4xf32> -> tensor<8x2x4xf32>
  %d = smp.matmul %p, %u : (tensor<8x2x4xf32>, tensor<4x16xf32>) -> tensor<8x2x16xf32>
  return %a, %b, %c, %d : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8x2x16xf32>
}

// -----

// The transpose of a product used once is the product of the swapped
// operands with both flags flipped (a weight gradient x^T dy of a [out, in]
// weight becomes dy^T x, written in the weight's layout); a product used
// elsewhere too, a rank-1 operand, and a permutation of other dims keep the
// transpose.
// CHECK-LABEL: func.func @transposed_matmul
// CHECK-SAME: (%[[X:.*]]: tensor<6x4xf32>, %[[G:.*]]: tensor<6x8xf32>, %[[B:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<5x4xf32>, %[[V:.*]]: tensor<4xf32>)
// CHECK-NEXT: %[[D:.*]] = smp.matmul %[[G]], %[[X]] {transpose_lhs = true} : (tensor<6x8xf32>, tensor<6x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[E:.*]] = smp.matmul %[[W]], %[[B]] {transpose_rhs = true} : (tensor<5x4xf32>, tensor<2x3x4xf32>) -> tensor<2x5x3xf32>
// CHECK-NEXT: %[[F:.*]] = smp.matmul %[[X]], %[[G]] {transpose_lhs = true}
// CHECK-NEXT: %[[FT:.*]] = smp.transpose %[[F]]
// CHECK: smp.matmul %[[B]], %[[V]]
// CHECK-NEXT: smp.transpose
// CHECK: smp.transpose %{{.*}} {perm = array<i64: 1, 0, 2>}
func.func @transposed_matmul(%x: tensor<6x4xf32>, %g: tensor<6x8xf32>, %b: tensor<2x3x4xf32>, %w: tensor<5x4xf32>, %v: tensor<4xf32>) -> (tensor<8x4xf32>, tensor<2x5x3xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<3x2xf32>, tensor<3x2x5xf32>) {
  %dw = smp.matmul %x, %g {transpose_lhs = true} : (tensor<6x4xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %dwt = smp.transpose %dw {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %e = smp.matmul %b, %w {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %et = smp.transpose %e {perm = array<i64: 0, 2, 1>} : tensor<2x3x5xf32> -> tensor<2x5x3xf32>
  %f = smp.matmul %x, %g {transpose_lhs = true} : (tensor<6x4xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %ft = smp.transpose %f {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %r = smp.matmul %b, %v : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  %rt = smp.transpose %r {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %p = smp.matmul %b, %w {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
  %pt = smp.transpose %p {perm = array<i64: 1, 0, 2>} : tensor<2x3x5xf32> -> tensor<3x2x5xf32>
  return %dwt, %et, %ft, %f, %rt, %pt : tensor<8x4xf32>, tensor<2x5x3xf32>, tensor<8x4xf32>, tensor<4x8xf32>, tensor<3x2xf32>, tensor<3x2x5xf32>
}

// -----

// A constant splits into constants, along any axis (torch 1.13's
// repeat_interleave builds an Expand shape through a Split of constants;
// the importer needs it folded). A split of a splat stays splats.
// CHECK-LABEL: func.func @split_constant
// CHECK-DAG: %[[A:.*]] = smp.constant dense<{{\[}}[1], [4]]> : tensor<2x1xi64>
// CHECK-DAG: %[[B:.*]] = smp.constant dense<{{\[}}[2, 3], [5, 6]]> : tensor<2x2xi64>
// CHECK-DAG: %[[S:.*]] = smp.constant dense<7> : tensor<3xi64>
// CHECK: return %[[A]], %[[B]], %[[S]], %[[S]]
func.func @split_constant() -> (tensor<2x1xi64>, tensor<2x2xi64>, tensor<3xi64>, tensor<3xi64>) {
  %c = smp.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %a, %b = smp.split %c {axis = 1 : i64, sizes = array<i64: 1, 2>} : tensor<2x3xi64> -> tensor<2x1xi64>, tensor<2x2xi64>
  %s = smp.constant dense<7> : tensor<6xi64>
  %s0, %s1 = smp.split %s {axis = -1 : i64, sizes = array<i64: 3, 3>} : tensor<6xi64> -> tensor<3xi64>, tensor<3xi64>
  return %a, %b, %s0, %s1 : tensor<2x1xi64>, tensor<2x2xi64>, tensor<3xi64>, tensor<3xi64>
}
