// RUN: smp-opt %s -split-input-file | smp-opt -split-input-file | FileCheck %s --check-prefix=ROUND
// RUN: smp-opt %s -canonicalize -split-input-file | FileCheck %s
// smp.mod and smp.cumsum: round trip and constant folding.

// ROUND-LABEL: func.func @round_trip
// ROUND: smp.mod %arg0, %arg1 : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
// ROUND: smp.mod %arg2, %arg2 {fmod = true} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// ROUND: smp.cumsum %arg2 {axis = -1 : i64, exclusive = true} : tensor<4xf32>
// ROUND: smp.cumsum %arg0 {axis = 0 : i64, reverse = true} : tensor<2x3xi64>
// CHECK-LABEL: func.func @round_trip
func.func @round_trip(%a: tensor<2x3xi64>, %b: tensor<3xi64>, %x: tensor<4xf32>)
    -> (tensor<2x3xi64>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xi64>) {
  %0 = smp.mod %a, %b : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  %1 = smp.mod %x, %x {fmod = true} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = smp.cumsum %x {axis = -1 : i64, exclusive = true} : tensor<4xf32>
  %3 = smp.cumsum %a {axis = 0 : i64, reverse = true} : tensor<2x3xi64>
  return %0, %1, %2, %3 : tensor<2x3xi64>, tensor<4xf32>, tensor<4xf32>, tensor<2x3xi64>
}

// -----

// Floor remainders take the divisor's sign, fmod the dividend's; floats too.
// CHECK-LABEL: func.func @mod_fold
// CHECK-DAG: smp.constant dense<[2, -2, -1, 0]> : tensor<4xi64>
// CHECK-DAG: smp.constant dense<[-1, 1, 1, 0]> : tensor<4xi32>
// CHECK-DAG: smp.constant dense<[-1.500000e+00, 1.000000e+00]> : tensor<2xf32>
// CHECK-NOT: smp.mod
func.func @mod_fold() -> (tensor<4xi64>, tensor<4xi32>, tensor<2xf32>) {
  %a = smp.constant dense<[-4, 7, 5, -9223372036854775808]> : tensor<4xi64>
  %b = smp.constant dense<[3, -3, -2, -1]> : tensor<4xi64>
  %0 = smp.mod %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %c = smp.constant dense<[-4, 7, 5, 6]> : tensor<4xi32>
  %d = smp.constant dense<[3, -3, -2, 3]> : tensor<4xi32>
  %1 = smp.mod %c, %d {fmod = true} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %x = smp.constant dense<[-5.5, 5.0]> : tensor<2xf32>
  %y = smp.constant dense<[2.0, -2.0]> : tensor<2xf32>
  %2 = smp.mod %x, %y {fmod = true} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0, %1, %2 : tensor<4xi64>, tensor<4xi32>, tensor<2xf32>
}

// -----

// An integer remainder by zero is left for the runtime to report, as
// are unsigned values beyond int64 (the folder reads them as negative).
// CHECK-LABEL: func.func @mod_no_fold
// CHECK: smp.mod
// CHECK: smp.mod
func.func @mod_no_fold() -> (tensor<2xi64>, tensor<ui64>) {
  %a = smp.constant dense<[4, 5]> : tensor<2xi64>
  %z = smp.constant dense<[2, 0]> : tensor<2xi64>
  %0 = smp.mod %a, %z : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  %u = smp.constant dense<18446744073709551615> : tensor<ui64>
  %v = smp.constant dense<10> : tensor<ui64>
  %1 = smp.mod %u, %v : (tensor<ui64>, tensor<ui64>) -> tensor<ui64>
  return %0, %1 : tensor<2xi64>, tensor<ui64>
}

// -----

// Cumulative sums fold along any axis, exclusive and reversed.
// CHECK-LABEL: func.func @cumsum_fold
// CHECK-DAG: smp.constant dense<{{\[\[}}1, 3, 6], [4, 9, 15]]> : tensor<2x3xi64>
// CHECK-DAG: smp.constant dense<{{\[\[}}4, 5, 6], [0, 0, 0]]> : tensor<2x3xi64>
// CHECK-DAG: smp.constant dense<[5.000000e+00, 3.000000e+00, 0.000000e+00]> : tensor<3xf32>
// CHECK-NOT: smp.cumsum
func.func @cumsum_fold() -> (tensor<2x3xi64>, tensor<2x3xi64>, tensor<3xf32>) {
  %a = smp.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = smp.cumsum %a {axis = -1 : i64} : tensor<2x3xi64>
  %1 = smp.cumsum %a {axis = 0 : i64, exclusive = true, reverse = true} : tensor<2x3xi64>
  %x = smp.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %2 = smp.cumsum %x {axis = 0 : i64, exclusive = true, reverse = true} : tensor<3xf32>
  return %0, %1, %2 : tensor<2x3xi64>, tensor<2x3xi64>, tensor<3xf32>
}

// -----

// A sum that overflows its element type is left for the kernel (it wraps).
// CHECK-LABEL: func.func @cumsum_overflow
// CHECK: smp.cumsum
func.func @cumsum_overflow() -> tensor<2xi8> {
  %a = smp.constant dense<[100, 100]> : tensor<2xi8>
  %0 = smp.cumsum %a {axis = 0 : i64} : tensor<2xi8>
  return %0 : tensor<2xi8>
}
