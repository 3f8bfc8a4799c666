// smp-optimizer (lib/Dialect/Smp/Transforms/OptimizerUpdate.cpp): consumes
// the smp.grad_of results and the smp.found_inf flag of the step contract.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-optimizer=optimizer=adamw' | FileCheck %s
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-optimizer=optimizer=sgd momentum=0.9' | FileCheck %s --check-prefix=SGD
// RUN: not smp-opt %s '--smp-optimizer=optimizer=lamb' 2>&1 | FileCheck %s --check-prefix=BAD

// smp-optimizer ends the step: the inputs @lr and @step, AdamW's states
// (exp_avg, exp_avg_sq) for the parameter, the gradient result replaced by
// the updates, the skip flag of loss scaling consumed (its own step count
// @optimizer_step, which a skipped step does not advance), the other
// updates and outputs kept, and the backward marks of a step that is not
// unrolled dropped.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[^:]*]]: tensor<3xf32> {smp.param = "w"}
// CHECK-SAME: %[[LR:[^:]*]]: tensor<f32> {smp.input = "@lr"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<f32> {smp.input = "@step"}
// CHECK-SAME: %[[OS:[^:]*]]: tensor<f32> {smp.state = "@optimizer_step"}
// CHECK-SAME: %[[M:[^:]*]]: tensor<3xf32> {smp.state = "w.exp_avg"}
// CHECK-SAME: %[[V:[^:]*]]: tensor<3xf32> {smp.state = "w.exp_avg_sq"}
// CHECK-SAME: -> (tensor<f32> {smp.update = "@loss_scale"}, tensor<f32> {smp.update = "@optimizer_step"}, tensor<3xf32> {smp.update = "w"}, tensor<3xf32> {smp.update = "w.exp_avg"}, tensor<3xf32> {smp.update = "w.exp_avg_sq"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"})
// CHECK-NOT: smp.bwd
// CHECK: %[[G:.*]] = smp.mul %[[W]], %[[W]]
// CHECK: %[[NEXT:.*]] = smp.add %[[OS]], %{{.*}}
// CHECK: %[[NEWSTEP:.*]] = smp.where %[[FOUND:[^,]*]], %[[OS]], %[[NEXT]]
// CHECK: smp.adam_update %[[W]], %[[G]], %[[M]], %[[V]], %[[LR]], %[[NEXT]] skip %[[FOUND]](tensor<i1>) {weight_decay = 0.00999999977 : f32}
// SGD-LABEL: func.func @train_step
// SGD: smp.sgd_update {{.*}}, %arg4, %[[NEXT:.*]] skip %arg2(tensor<i1>) {momentum = 0.899999976 : f32}
// SGD-SAME: tensor<3xf32>, tensor<f32>
func.func @train_step(%loss: tensor<f32>, %w: tensor<3xf32> {smp.param = "w"},
                      %found: tensor<i1>, %s: tensor<f32> {smp.state = "@loss_scale"})
    -> (tensor<3xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"},
        tensor<f32> {smp.update = "@loss_scale"}, tensor<i1> {smp.found_inf},
        tensor<f32> {smp.output = "grad_norm"}) {
  %0 = smp.mul %w, %w {smp.bwd} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %0, %loss, %s, %found, %loss : tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<i1>, tensor<f32>
}

// -----

// ZeRO-1: the gradient is this rank's chunk of the flattened parameter
// (a dp chunk layout): the rank slices its chunk of the parameter, keeps
// states of the chunk's size (recording the shape), and all-gathers the
// updated chunks back into the parameter's shape.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<2xf32> {smp.layout = #smp.layout<dp = chunk(of = [2, 2])>, smp.state = "w.exp_avg"}
// CHECK: %[[FLAT:.*]] = smp.reshape %arg1 : tensor<2x2xf32> -> tensor<4xf32>
// CHECK: %[[MINE:.*]] = shard.all_slice %[[FLAT]] on @dp grid_axes = [0] slice_axis = 0 : tensor<4xf32> -> tensor<2xf32>
// CHECK: %[[NEW:.*]], %{{.*}}, %{{.*}} = smp.adam_update %[[MINE]], %arg2
// CHECK: %[[ALL:.*]] = shard.all_gather %[[NEW]] on @dp grid_axes = [0] gather_axis = 0 : tensor<2xf32> -> tensor<4xf32>
// CHECK: %[[BACK:.*]] = smp.reshape %[[ALL]] : tensor<4xf32> -> tensor<2x2xf32>
// CHECK: return %[[BACK]]
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%loss: tensor<f32>, %w: tensor<2x2xf32> {smp.param = "w"},
                        %g: tensor<2xf32>)
      -> (tensor<2xf32> {smp.grad_of = 1 : i64, smp.layout = #smp.layout<dp = chunk(of = [2, 2])>},
          tensor<f32> {smp.output = "loss"}) {
    return %g, %loss : tensor<2xf32>, tensor<f32>
  }
}
// BAD: unknown optimizer 'lamb' (expected sgd, adam or adamw)
