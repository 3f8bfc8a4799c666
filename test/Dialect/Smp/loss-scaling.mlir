// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-loss-scaling=growth-interval=3' | FileCheck %s

// smp-loss-scaling after a backward seeded with loss * @loss_scale: the
// gradient is divided by the scale, an inf or NaN in it is flagged
// (smp.found_inf, for smp-optimizer, and the output `skipped`), and the
// scale halves after an overflow, doubles after 3 good steps (the state
// @growth_tracker counts them).
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[S:[^:]*]]: tensor<f32> {smp.init = 1.024000e+03 : f32, smp.state = "@loss_scale"}
// CHECK-SAME: %[[GT:[^:]*]]: tensor<f32> {smp.state = "@growth_tracker"}
// CHECK-SAME: -> (tensor<3xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.update = "@loss_scale"}, tensor<f32> {smp.update = "@growth_tracker"}, tensor<i1> {smp.found_inf}, tensor<f32> {smp.output = "skipped"})
// CHECK: %[[G:.*]] = smp.mul %arg1, %[[S]]
// CHECK: %[[Z:.*]] = smp.mul %[[G]], %{{.*}} : (tensor<3xf32>, tensor<f32>)
// CHECK: %[[T:.*]] = smp.reduce_sum %[[Z]]
// CHECK: %[[INV:.*]] = smp.div %{{.*}}, %[[S]]
// CHECK: %[[UNSCALED:.*]] = smp.mul %[[G]], %[[INV]]
// CHECK: %[[FINITE:.*]] = smp.equal %[[T]], %[[T]]
// CHECK: %[[FOUND:.*]] = smp.not %[[FINITE]]
// CHECK: %[[NEXT:.*]] = smp.add %[[GT]], %{{.*}}
// CHECK: %[[THREE:.*]] = smp.constant dense<2.500000e+00>
// CHECK: %[[GROW:.*]] = smp.greater %[[NEXT]], %[[THREE]]
// CHECK: %[[DOUBLE:.*]] = smp.mul %[[S]], %{{.*}}
// CHECK: %[[GROWN:.*]] = smp.where %[[GROW]], %[[DOUBLE]], %[[S]]
// CHECK: %[[HALF:.*]] = smp.mul %[[S]], %{{.*}}
// CHECK: %[[NEWSCALE:.*]] = smp.where %[[FOUND]], %[[HALF]], %[[GROWN]]
// CHECK: %[[SKIPPED:.*]] = smp.cast %[[FOUND]] : tensor<i1> to tensor<f32>
// CHECK: return %[[UNSCALED]], %{{.*}}, %[[NEWSCALE]], %{{.*}}, %[[FOUND]], %[[SKIPPED]]
func.func @train_step(%loss: tensor<f32>, %w: tensor<3xf32> {smp.param = "w"},
                      %s: tensor<f32> {smp.state = "@loss_scale", smp.init = 1024.0 : f32})
    -> (tensor<3xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"}) {
  %0 = smp.mul %w, %s : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %0, %loss : tensor<3xf32>, tensor<f32>
}

// -----

// expected-error @+1 {{smp-loss-scaling: the step has no state @loss_scale (smp-build-gradients{loss-scaling=true} seeds}}
func.func @train_step(%loss: tensor<f32>, %w: tensor<3xf32> {smp.param = "w"})
    -> (tensor<3xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"}) {
  return %w, %loss : tensor<3xf32>, tensor<f32>
}
