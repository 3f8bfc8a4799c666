// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=cross_entropy:logits:labels optimizer=sgd momentum=0.9 freeze=^enc\..*})' | FileCheck %s

// --freeze: parameters matching the regex get no gradient, no state and no
// update; the others train (SGD with momentum keeps one buffer each).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {smp.state = "head.w.momentum_buffer"}
// CHECK-NOT: smp.state = "enc.w
// CHECK-SAME: -> (tensor<3x5xf32> {smp.update = "head.w"}, tensor<3x5xf32> {smp.update = "head.w.momentum_buffer"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"})
// CHECK: smp.sgd_update {{.*}} {momentum = 0.899999976 : f32}
// CHECK-NOT: smp.sgd_update
func.func @main(%x: tensor<4x2xf32> {smp.input = "x"},
                %e: tensor<2x3xf32> {smp.param = "enc.w"},
                %h: tensor<3x5xf32> {smp.param = "head.w"})
    -> (tensor<4x5xf32> {smp.output = "logits"}) {
  %0 = smp.matmul %x, %e : (tensor<4x2xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  %1 = smp.matmul %0, %h : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
  return %1 : tensor<4x5xf32>
}
