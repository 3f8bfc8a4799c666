// The mask's gradient: a trainable additive mask (T5's relative position
// bias) gets one smp.attention_mask_grad of the mask's shape [1, H, S, S]
// (no [B, H, S, S] tensor), which flows to the parameter; a mask that is an
// input gets none.
// RUN: smp-opt %s -split-input-file '--smp-build-gradients=loss=mse:y:target' | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[BIAS:[a-z0-9]+]]: tensor<1x2x4x4xf32> {smp.param = "rel_bias"}
// CHECK-NOT: tensor<2x2x4x4xf32>
// CHECK: %[[O:[^,]*]], %[[L:[^ ]*]] = smp.attention %[[Q:[^,]*]], %[[K:[^,]*]], %[[V:[^,]*]], %[[BIAS]] {scale = 2.500000e-01 : f32}
// CHECK-NOT: tensor<2x2x4x4xf32>
// CHECK-DAG: smp.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[L]], %[[G:[^,]*]], %[[BIAS]] {scale = 2.500000e-01 : f32, smp.bwd}
// CHECK-DAG: %[[DB:[^ ]*]] = smp.attention_mask_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[L]], %[[G]], %[[BIAS]] {scale = 2.500000e-01 : f32, smp.bwd} : {{.*}} -> tensor<1x2x4x4xf32>
// CHECK-NOT: tensor<2x2x4x4xf32>
// CHECK: return {{.*}}%[[DB]]
func.func @main(%q: tensor<2x2x4x8xf32> {smp.input = "q"},
                %k: tensor<2x2x4x8xf32> {smp.input = "k"},
                %v: tensor<2x2x4x8xf32> {smp.input = "v"},
                %bias: tensor<1x2x4x4xf32> {smp.param = "rel_bias"})
    -> (tensor<2x2x4x8xf32> {smp.output = "y"}) {
  %o, %l = smp.attention %q, %k, %v, %bias {scale = 0.25 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<1x2x4x4xf32>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4x2xf32>)
  return %o : tensor<2x2x4x8xf32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK: smp.attention_grad
// CHECK-NOT: smp.attention_mask_grad
func.func @main(%q: tensor<2x2x4x8xf32> {smp.input = "q"},
                %k: tensor<2x2x4x8xf32> {smp.input = "k"},
                %v: tensor<2x2x4x8xf32> {smp.param = "v"},
                %mask: tensor<2x1x1x4xf32> {smp.input = "mask"})
    -> (tensor<2x2x4x8xf32> {smp.output = "y"}) {
  %o, %l = smp.attention %q, %k, %v, %mask {scale = 0.25 : f32} : (tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x1x1x4xf32>) -> (tensor<2x2x4x8xf32>, tensor<2x2x4x2xf32>)
  return %o : tensor<2x2x4x8xf32>
}
