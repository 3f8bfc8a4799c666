// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-raise-activations))' | FileCheck %s
// RUN: smp-opt %s -split-input-file -smp-raise | FileCheck %s

// torch.nn.GELU() as exported: x * (erf(x / sqrt(2)) + 1) * 0.5.
// CHECK-LABEL: func.func @gelu_erf
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[G:.*]] = smp.gelu %[[X]] : tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gelu_erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s2 = smp.constant dense<1.41421354> : tensor<f32>
  %d = smp.div %x, %s2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = smp.erf %d : tensor<4x8xf32>
  %one = smp.constant dense<1.0> : tensor<f32>
  %a = smp.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = smp.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = smp.constant dense<0.5> : tensor<f32>
  %y = smp.mul %m, %half : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// GELU(approximate='tanh'), with the cube written as x*x*x.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK: smp.gelu %{{.*}} {approximate = #smp<gelu_approximation tanh>}
// CHECK-NOT: smp.tanh
func.func @gelu_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %xx = smp.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %x3 = smp.mul %x, %xx : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %k = smp.constant dense<0.044715> : tensor<f32>
  %kx3 = smp.mul %k, %x3 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %in = smp.add %x, %kx3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = smp.constant dense<0.797884583> : tensor<f32>
  %bin = smp.mul %b, %in : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = smp.tanh %bin : tensor<4x8xf32>
  %one = smp.constant dense<1.0> : tensor<f32>
  %a = smp.add %one, %t : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %xa = smp.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %half = smp.constant dense<0.5> : tensor<f32>
  %y = smp.mul %half, %xa : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[S:.*]] = smp.silu %[[X]]
// CHECK-NEXT: return %[[S]]
func.func @silu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = smp.sigmoid %x : tensor<4x8xf32>
  %y = smp.mul %x, %s : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A wrong constant (0.6 instead of 0.5) is not a GELU.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: smp.gelu
// CHECK: smp.erf
func.func @not_gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s2 = smp.constant dense<1.41421354> : tensor<f32>
  %d = smp.div %x, %s2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = smp.erf %d : tensor<4x8xf32>
  %one = smp.constant dense<1.0> : tensor<f32>
  %a = smp.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %m = smp.mul %x, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = smp.constant dense<0.6> : tensor<f32>
  %y = smp.mul %m, %c : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
