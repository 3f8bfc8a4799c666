// RUN: smp-opt %s -split-input-file | smp-opt -split-input-file | FileCheck %s --check-prefix=ROUND
// RUN: smp-opt %s -canonicalize -split-input-file | FileCheck %s
// smp.gather_nd and smp.gather_elements: round trip and constant folding.

// ROUND-LABEL: func.func @round_trip
// ROUND: smp.gather_nd %arg0, %arg1 {batch_dims = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x1xi64>) -> tensor<2x5x4xf32>
// ROUND: smp.gather_elements %arg0, %arg2 {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x2x6xi32>) -> tensor<2x2x6xf32>
// ROUND: smp.gather_nd_grad %arg1, %{{.*}} {batch_dims = 1 : i64} : (tensor<2x5x1xi64>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
// ROUND: smp.gather_elements_grad %arg2, %{{.*}} {axis = 2 : i64} : (tensor<2x2x6xi32>, tensor<2x2x6xf32>) -> tensor<2x3x4xf32>
func.func @round_trip(%x: tensor<2x3x4xf32>, %i: tensor<2x5x1xi64>, %j: tensor<2x2x6xi32>)
    -> (tensor<2x3x4xf32>, tensor<2x3x4xf32>) {
  %0 = smp.gather_nd %x, %i {batch_dims = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x1xi64>) -> tensor<2x5x4xf32>
  %1 = smp.gather_elements %x, %j {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<2x2x6xi32>) -> tensor<2x2x6xf32>
  %2 = smp.gather_nd_grad %i, %0 {batch_dims = 1 : i64} : (tensor<2x5x1xi64>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
  %3 = smp.gather_elements_grad %j, %1 {axis = 2 : i64} : (tensor<2x2x6xi32>, tensor<2x2x6xf32>) -> tensor<2x3x4xf32>
  return %2, %3 : tensor<2x3x4xf32>, tensor<2x3x4xf32>
}

// -----

// Constant operands fold (the dynamo exports' attention masks): index
// tuples (negative ones from the end), with batch dims, and elements.
// CHECK-LABEL: func.func @fold
// CHECK-DAG: smp.constant dense<[4, 3, 2]> : tensor<3xi64>
// CHECK-DAG: smp.constant dense<{{\[\[}}3, 4], [1, 2]]> : tensor<2x2xi64>
// CHECK-DAG: smp.constant dense<{{\[\[}}3, 1], [6, 4]]> : tensor<2x2xi64>
// CHECK-DAG: smp.constant dense<{{\[\[}}1, 1], [4, 3]]> : tensor<2x2xi64>
// CHECK-NOT: smp.gather
func.func @fold() -> (tensor<3xi64>, tensor<2x2xi64>, tensor<2x2xi64>, tensor<2x2xi64>) {
  %d = smp.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %e = smp.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %i = smp.constant dense<[[1, 1], [-1, 0], [0, -1]]> : tensor<3x2xi64>
  %0 = smp.gather_nd %d, %i : (tensor<2x2xi64>, tensor<3x2xi64>) -> tensor<3xi64>
  %r = smp.constant dense<[[1], [0]]> : tensor<2x1xi64>
  %1 = smp.gather_nd %d, %r : (tensor<2x2xi64>, tensor<2x1xi64>) -> tensor<2x2xi64>
  %b = smp.constant dense<[[2, 0], [2, -3]]> : tensor<2x2xi64>
  %bb = smp.reshape %b : tensor<2x2xi64> -> tensor<2x2x1xi64>
  %2 = smp.gather_nd %e, %bb {batch_dims = 1 : i64} : (tensor<2x3xi64>, tensor<2x2x1xi64>) -> tensor<2x2xi64>
  %g = smp.constant dense<[[0, 0], [1, 0]]> : tensor<2x2xi64>
  %3 = smp.gather_elements %d, %g {axis = 1 : i64} : (tensor<2x2xi64>, tensor<2x2xi64>) -> tensor<2x2xi64>
  return %0, %1, %2, %3 : tensor<3xi64>, tensor<2x2xi64>, tensor<2x2xi64>, tensor<2x2xi64>
}

// -----

// An index out of range is left for the kernel (which reports it).
// CHECK-LABEL: func.func @out_of_range
// CHECK: smp.gather_nd
// CHECK: smp.gather_elements
func.func @out_of_range() -> (tensor<1xi64>, tensor<1x1xi64>) {
  %d = smp.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %i = smp.constant dense<[[2, 0]]> : tensor<1x2xi64>
  %0 = smp.gather_nd %d, %i : (tensor<2x2xi64>, tensor<1x2xi64>) -> tensor<1xi64>
  %j = smp.constant dense<[[-3]]> : tensor<1x1xi64>
  %1 = smp.gather_elements %d, %j {axis = 0 : i64} : (tensor<2x2xi64>, tensor<1x1xi64>) -> tensor<1x1xi64>
  return %0, %1 : tensor<1xi64>, tensor<1x1xi64>
}
