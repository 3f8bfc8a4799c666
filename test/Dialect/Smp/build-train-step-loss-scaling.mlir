// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=adam loss-scaling=true init-scale=1024.0 growth-interval=3})' | FileCheck %s

// Dynamic loss scaling: the scaled loss is differentiated, the gradients are
// unscaled and checked for inf/NaN, the update is skipped on overflow, and
// the scale, the growth tracker and the optimizer's own step count are
// states updated in place.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[S:[^:]*]]: tensor<f32> {smp.init = 1.024000e+03 : f32, smp.state = "@loss_scale"}
// CHECK-SAME: %[[GT:[^:]*]]: tensor<f32> {smp.state = "@growth_tracker"}
// CHECK-SAME: %[[OS:[^:]*]]: tensor<f32> {smp.state = "@optimizer_step"}
// CHECK-SAME: -> (tensor<f32> {smp.update = "@loss_scale"}, tensor<f32> {smp.update = "@growth_tracker"}, tensor<f32> {smp.update = "@optimizer_step"}, tensor<3xf32> {smp.update = "w"}, tensor<3xf32> {smp.update = "w.exp_avg"}, tensor<3xf32> {smp.update = "w.exp_avg_sq"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"}, tensor<f32> {smp.output = "skipped"}, tensor<f32> {smp.output = "loss_scale"})
// CHECK: %[[USED:.*]] = smp.mul %[[S]], %{{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: %[[SCALED:.*]] = smp.mul %{{.*}}, %[[S]]
// CHECK: %[[FINITE:.*]] = smp.equal %[[T:.*]], %[[T]]
// CHECK: %[[FOUND:.*]] = smp.not %[[FINITE]]
// CHECK: smp.adam_update {{.*}} skip %[[FOUND]](tensor<i1>)
func.func @main(%x: tensor<3xf32> {smp.input = "x"},
                %w: tensor<3xf32> {smp.param = "w"})
    -> (tensor<f32> {smp.output = "y"}) {
  %0 = smp.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = smp.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
