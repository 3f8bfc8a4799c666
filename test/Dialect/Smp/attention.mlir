// smp.attention and smp.attention_grad round-trip (grouped-query: 8 query
// heads over 2 key/value heads; the value's head dim differs from the key's).
// RUN: smp-opt %s | smp-opt | FileCheck %s --check-prefix=ROUND

// ROUND-LABEL: func.func @gqa
// ROUND: smp.attention %arg0, %arg1, %arg2, %arg3 {causal = true, scale = 1.250000e-01 : f32} : (tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>, tensor<2x1x1x7xi1>) -> (tensor<2x8x5x32xf32>, tensor<2x8x5x2xf32>)
// ROUND: smp.attention_grad %arg0, %arg1, %arg2, %{{.*}}, %{{.*}}, %{{.*}}, %arg3 {causal = true, scale = 1.250000e-01 : f32}
func.func @gqa(%q: tensor<2x8x5x16xf32>, %k: tensor<2x2x7x16xf32>,
               %v: tensor<2x2x7x32xf32>, %m: tensor<2x1x1x7xi1>)
    -> (tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>) {
  %o, %l = smp.attention %q, %k, %v, %m {scale = 0.125 : f32, causal = true} : (tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>, tensor<2x1x1x7xi1>) -> (tensor<2x8x5x32xf32>, tensor<2x8x5x2xf32>)
  %dq, %dk, %dv = smp.attention_grad %q, %k, %v, %o, %l, %o, %m {scale = 0.125 : f32, causal = true} : (tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>, tensor<2x8x5x32xf32>, tensor<2x8x5x2xf32>, tensor<2x8x5x32xf32>, tensor<2x1x1x7xi1>) -> (tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>)
  return %dq, %dk, %dv : tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>
}

