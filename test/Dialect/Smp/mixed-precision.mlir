// RUN: smp-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(smp-mixed-precision{precision=bf16}))' | FileCheck %s

// Parameters and inputs are cast down once, f32 constants are converted,
// integer values are untouched, and the f32 result is cast back up.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32> {smp.input = "x"}, %[[W:.*]]: tensor<3x4xf32> {smp.param = "w"}, %[[I:.*]]: tensor<2xi64> {smp.input = "i"})
// CHECK-SAME: -> (tensor<2x4xf32> {smp.output = "y"}, tensor<2xi64> {smp.output = "j"})
// CHECK-DAG: %[[XL:.*]] = smp.cast %[[X]] : tensor<2x3xf32> to tensor<2x3xbf16>
// CHECK-DAG: %[[WL:.*]] = smp.cast %[[W]] : tensor<3x4xf32> to tensor<3x4xbf16>
// CHECK: %[[M:.*]] = smp.matmul %[[XL]], %[[WL]] : (tensor<2x3xbf16>, tensor<3x4xbf16>) -> tensor<2x4xbf16>
// CHECK: %[[H:.*]] = smp.constant dense<5.000000e-01> : tensor<bf16>
// CHECK: %[[G:.*]] = smp.mul %[[M]], %[[H]] : (tensor<2x4xbf16>, tensor<bf16>) -> tensor<2x4xbf16>
// CHECK: %[[J:.*]] = smp.add %[[I]], %[[I]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK: %[[Y:.*]] = smp.cast %[[G]] : tensor<2x4xbf16> to tensor<2x4xf32>
// CHECK: return %[[Y]], %[[J]]
func.func @main(%x: tensor<2x3xf32> {smp.input = "x"},
                %w: tensor<3x4xf32> {smp.param = "w"},
                %i: tensor<2xi64> {smp.input = "i"})
    -> (tensor<2x4xf32> {smp.output = "y"}, tensor<2xi64> {smp.output = "j"}) {
  %0 = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %h = smp.constant dense<0.5> : tensor<f32>
  %1 = smp.mul %0, %h : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %2 = smp.add %i, %i : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %1, %2 : tensor<2x4xf32>, tensor<2xi64>
}

// -----

// An int-to-float cast now produces bf16; a float cast that became a no-op
// disappears.
// CHECK-LABEL: func.func @casts
// CHECK: smp.cast %{{.*}} : tensor<4xi64> to tensor<4xbf16>
// CHECK-NOT: smp.cast {{.*}} : tensor<4xbf16> to tensor<4xbf16>
func.func @casts(%i: tensor<4xi64> {smp.input = "i"}) -> (tensor<4xf32> {smp.output = "y"}) {
  %0 = smp.cast %i : tensor<4xi64> to tensor<4xf32>
  %1 = smp.exp %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Attention computes in the low type (q, k, v and the float mask are cast
// down with the rest) but its log-sum-exp stays f32, as the op requires.
// CHECK-LABEL: func.func @attention
// CHECK: smp.attention {{.*}} : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x1x4x4xbf16>) -> (tensor<1x2x4x8xbf16>, tensor<1x2x4x2xf32>)
func.func @attention(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>,
                     %v: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x4xf32>)
    -> tensor<1x2x4x8xf32> {
  %o, %l = smp.attention %q, %k, %v, %m {scale = 0.25 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x2xf32>)
  return %o : tensor<1x2x4x8xf32>
}
