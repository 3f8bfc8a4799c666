// RUN: smp-opt %s -split-input-file -verify-diagnostics
// Verifier errors of smp.gather_nd, smp.gather_elements and their gradients.

func.func @nd_last_dim(%d: tensor<2x3xf32>, %i: tensor<4x3xi64>) {
  // expected-error @+2 {{'smp.gather_nd' the last dim of indices (3) must be in [1, rank(data) - batch_dims = 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.gather_nd %d, %i : (tensor<2x3xf32>, tensor<4x3xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @nd_batch_dims(%d: tensor<2x3xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+2 {{'smp.gather_nd' batch_dims 2 must be in [0, min(rank(data), rank(indices)))}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.gather_nd %d, %i {batch_dims = 2 : i64} : (tensor<2x3xf32>, tensor<2x1xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @nd_batch_mismatch(%d: tensor<2x3xf32>, %i: tensor<3x1xi64>) {
  // expected-error @+2 {{'smp.gather_nd' batch dim 0 differs: data [2, 3], indices [3, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.gather_nd %d, %i {batch_dims = 1 : i64} : (tensor<2x3xf32>, tensor<3x1xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @el_rank(%d: tensor<2x3xf32>, %i: tensor<6xi64>) {
  // expected-error @+2 {{'smp.gather_elements' indices [6] must have the rank of data [2, 3] (>= 1)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.gather_elements %d, %i {axis = 0 : i64} : (tensor<2x3xf32>, tensor<6xi64>) -> tensor<6xf32>
  return
}

// -----

func.func @el_larger(%d: tensor<2x3xf32>, %i: tensor<5x4xi64>) {
  // expected-error @+2 {{'smp.gather_elements' indices [5, 4] exceed data [2, 3] in dim 1 (only the axis may be larger)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.gather_elements %d, %i {axis = 0 : i64} : (tensor<2x3xf32>, tensor<5x4xi64>) -> tensor<5x4xf32>
  return
}

// -----

func.func @el_axis(%d: tensor<2x3xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+2 {{'smp.gather_elements' axis 2 out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.gather_elements %d, %i {axis = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
  return
}

// -----

func.func @nd_grad_shape(%i: tensor<4x1xi64>, %g: tensor<4x2xf32>) {
  // expected-error @+1 {{'smp.gather_nd_grad' op grad 'tensor<4x2xf32>' is not the gather_nd result of 'tensor<2x3xf32>'}}
  %0 = smp.gather_nd_grad %i, %g : (tensor<4x1xi64>, tensor<4x2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @el_grad_shape(%i: tensor<2x2xi64>, %g: tensor<2x3xf32>) {
  // expected-error @+1 {{'smp.gather_elements_grad' op grad 'tensor<2x3xf32>' is not the gather_elements result of 'tensor<2x3xf32>' at indices 'tensor<2x2xi64>'}}
  %0 = smp.gather_elements_grad %i, %g {axis = 0 : i64} : (tensor<2x2xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
