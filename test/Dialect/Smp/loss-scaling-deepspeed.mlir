// RUN: smp-opt %s '--smp-loss-scaling=growth-interval=3 deepspeed-window=true hysteresis=2 min-scale=1.0' | FileCheck %s
// RUN: smp-opt %s '--smp-loss-scaling=growth-interval=3 deepspeed-window=true hysteresis=2 consecutive-hysteresis=true' | FileCheck %s --check-prefix=CONSEC

// DeepSpeed's DynamicLossScaler (smpc --loss-scaler deepspeed): the window
// counts from the step after an overflow, so the tracker must pass 3 + 1
// good steps and restarts at 1 after a growth (0 after an overflow); with
// hysteresis 2 an overflow halves the scale (floored at min-scale) only
// when the state @loss_scale_overflows already counts one, and that count
// resets when the scale grows.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[S:[^:]*]]: tensor<f32> {smp.init = 1.024000e+03 : f32, smp.state = "@loss_scale"}
// CHECK-SAME: %[[GT:[^:]*]]: tensor<f32> {smp.state = "@growth_tracker"}
// CHECK-SAME: %[[SEEN:[^:]*]]: tensor<f32> {smp.state = "@loss_scale_overflows"}
// CHECK-SAME: {smp.update = "@loss_scale"}, tensor<f32> {smp.update = "@growth_tracker"}, tensor<f32> {smp.update = "@loss_scale_overflows"}, tensor<i1> {smp.found_inf}
// CHECK: %[[FOUND:.*]] = smp.not
// CHECK: %[[NEXT:.*]] = smp.add %[[GT]], %{{.*}}
// CHECK: %[[FOUR:.*]] = smp.constant dense<3.500000e+00>
// CHECK: %[[GROW:.*]] = smp.greater %[[NEXT]], %[[FOUR]]
// CHECK: %[[GROWN:.*]] = smp.where %[[GROW]], %{{.*}}, %[[S]]
// CHECK: %[[HALF:.*]] = smp.mul %[[S]], %{{.*}}
// CHECK: %[[ONE:.*]] = smp.constant dense<1.000000e+00>
// CHECK: %[[FLOORED:.*]] = smp.max %[[HALF]], %[[ONE]]
// CHECK: %[[LASTONE:.*]] = smp.greater %[[SEEN]], %{{.*}}
// CHECK: %[[HALVE:.*]] = smp.and %[[FOUND]], %[[LASTONE]]
// CHECK: %[[COUNTED:.*]] = smp.where %[[LASTONE]], %[[SEEN]], %{{.*}}
// CHECK: %[[GOOD:.*]] = smp.not %[[FOUND]]
// CHECK: %[[RESET:.*]] = smp.and %[[GOOD]], %[[GROW]]
// CHECK: %[[KEPT:.*]] = smp.where %[[RESET]], %{{.*}}, %[[SEEN]]
// CHECK: %[[NEWSEEN:.*]] = smp.where %[[FOUND]], %[[COUNTED]], %[[KEPT]]
// CHECK: %[[UNHALVED:.*]] = smp.where %[[FOUND]], %[[S]], %[[GROWN]]
// CHECK: %[[NEWSCALE:.*]] = smp.where %[[HALVE]], %[[FLOORED]], %[[UNHALVED]]
// CHECK: %[[RESTART:.*]] = smp.constant dense<1.000000e+00>
// CHECK: %[[AFTERGROW:.*]] = smp.where %[[GROW]], %[[RESTART]], %[[NEXT]]
// CHECK: %[[NEWGT:.*]] = smp.where %[[FOUND]], %{{.*}}, %[[AFTERGROW]]
// CHECK: return %{{.*}}, %{{.*}}, %[[NEWSCALE]], %[[NEWGT]], %[[NEWSEEN]], %[[FOUND]]

// consecutive-hysteresis: every good step resets the count.
// CONSEC: %[[FOUND:.*]] = smp.not
// CONSEC-NOT: smp.max
// CONSEC: %[[GOOD:.*]] = smp.not %[[FOUND]]
// CONSEC-NEXT: %[[ZERO:.*]] = smp.constant dense<0.000000e+00>
// CONSEC-NEXT: %{{.*}} = smp.where %[[GOOD]], %[[ZERO]], %{{.*}}
func.func @train_step(%loss: tensor<f32>, %w: tensor<3xf32> {smp.param = "w"},
                      %s: tensor<f32> {smp.state = "@loss_scale", smp.init = 1024.0 : f32})
    -> (tensor<3xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"}) {
  %0 = smp.mul %w, %s : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %0, %loss : tensor<3xf32>, tensor<f32>
}
