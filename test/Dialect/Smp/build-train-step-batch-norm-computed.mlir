// A batch norm whose mean and variance the forward computes from its own
// input (nn.BatchNorm2d(track_running_stats=False), as the dynamo exporter
// writes it: ReduceMean statistics feeding an inference BatchNormalization)
// already normalises with its batch's statistics: smp-build-train-step
// keeps it as stored (no statistics recomputed, nothing to update) and
// differentiates through its statistics.
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=sgd})' | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: smp.running_stat
// CHECK: %[[MEAN:.*]] = smp.reduce_mean %{{.*}} {axes = array<i64: 0>, keepdims = false}
// CHECK: smp.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %[[MEAN]], %{{.*}} {
// CHECK-NOT: smp.running_stat
// CHECK: return
func.func @main(%x: tensor<4x3xf32> {smp.input = "x"}, %s: tensor<3xf32> {smp.param = "s"},
                %b: tensor<3xf32> {smp.param = "b"}) -> (tensor<f32> {smp.output = "y"}) {
  %m = smp.reduce_mean %x {axes = array<i64: 0>, keepdims = false} : tensor<4x3xf32> -> tensor<3xf32>
  %c = smp.sub %x, %m : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %q = smp.mul %c, %c : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  %v = smp.reduce_mean %q {axes = array<i64: 0>, keepdims = false} : tensor<4x3xf32> -> tensor<3xf32>
  %0 = smp.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f32} : (tensor<4x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %1 = smp.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
