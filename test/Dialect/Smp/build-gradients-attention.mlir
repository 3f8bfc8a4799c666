// The gradient smp-build-gradients builds for smp.attention from its op model
// (lib/Dialect/Smp/OpModels/Attention.cpp): one attention_grad from the
// forward's output and log-sum-exp; no [S, Sk] tensor in the step.
// RUN: smp-opt %s '--smp-build-gradients=loss=mse:y:target' | FileCheck %s --check-prefix=GRAD

// GRAD-LABEL: func.func @train_step
// GRAD-NOT: tensor<2x2x4x4xf32>
// GRAD: %[[O:[^,]*]], %[[L:[^ ]*]] = smp.attention %[[Q:[^,]*]], %[[K:[^,]*]], %[[V:[^ ]*]] {scale = 2.500000e-01 : f32}
// GRAD-NOT: tensor<2x2x4x4xf32>
// GRAD: smp.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[L]], %{{[^ ]*}} {scale = 2.500000e-01 : f32, smp.bwd}
// GRAD-NOT: tensor<2x2x4x4xf32>
func.func @main(%x: tensor<2x4x16xf32> {smp.input = "x"},
                %wq: tensor<16x16xf32> {smp.param = "wq"},
                %wk: tensor<16x16xf32> {smp.param = "wk"},
                %wv: tensor<16x16xf32> {smp.param = "wv"})
    -> (tensor<2x2x4x8xf32> {smp.output = "y"}) {
  %q2 = smp.matmul %x, %wq : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %k2 = smp.matmul %x, %wk : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %v2 = smp.matmul %x, %wv : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
  %q4 = smp.reshape %q2 : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %k4 = smp.reshape %k2 : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %v4 = smp.reshape %v2 : tensor<2x4x16xf32> -> tensor<2x4x2x8xf32>
  %q = smp.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %k = smp.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %v = smp.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x8xf32> -> tensor<2x2x4x8xf32>
  %o, %l = smp.attention %q, %k, %v {scale = 0.25 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4x2xf32>)
  return %o : tensor<2x2x4x8xf32>
}
