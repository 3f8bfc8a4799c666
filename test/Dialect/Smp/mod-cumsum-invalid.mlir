// RUN: smp-opt %s -split-input-file -verify-diagnostics
// Verifier errors of smp.mod and smp.cumsum.

func.func @mod_bool(%a: tensor<2xi1>) {
  // expected-error @+1 {{'smp.mod' op operands must be integers or floats, got 'tensor<2xi1>'}}
  %0 = smp.mod %a, %a : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
  return
}

// -----

func.func @mod_types(%a: tensor<2xi64>, %b: tensor<2xi32>) {
  // expected-error @+2 {{'smp.mod' operands have different element types 'i64' and 'i32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.mod %a, %b : (tensor<2xi64>, tensor<2xi32>) -> tensor<2xi64>
  return
}

// -----

func.func @mod_broadcast(%a: tensor<2x3xf32>, %b: tensor<2xf32>) {
  // expected-error @+2 {{'smp.mod' cannot broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.mod %a, %b {fmod = true} : (tensor<2x3xf32>, tensor<2xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @cumsum_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'smp.cumsum' op axis 2 out of range for rank 2}}
  %0 = smp.cumsum %a {axis = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @cumsum_scalar(%a: tensor<f32>) {
  // expected-error @+1 {{'smp.cumsum' op axis 0 out of range for rank 0}}
  %0 = smp.cumsum %a {axis = 0 : i64} : tensor<f32>
  return
}

// -----

func.func @cumsum_bool(%a: tensor<3xi1>) {
  // expected-error @+1 {{'smp.cumsum' op input must hold integers or floats, got 'tensor<3xi1>'}}
  %0 = smp.cumsum %a {axis = 0 : i64} : tensor<3xi1>
  return
}

// -----

func.func @cumsum_type(%a: tensor<3xf32>) {
  // expected-error @+1 {{'smp.cumsum' op requires the same type for all operands and results}}
  %0 = "smp.cumsum"(%a) {axis = 0 : i64} : (tensor<3xf32>) -> tensor<3xf64>
  return
}
