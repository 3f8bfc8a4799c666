// smp-build-gradients (BuildGradients.cpp) and the IR contract the later
// training-step passes read (TrainStepContract.h/.cpp): each gradient a
// result marked smp.grad_of = <parameter argument>.
// RUN: smp-opt %s '--smp-build-gradients=loss=mse:y:target dp=2 loss-scaling=true init-scale=8.0' | FileCheck %s
// RUN: smp-opt %s '--smp-build-gradients=loss=mse:y:target freeze=w1' | FileCheck %s --check-prefix=FREEZE
// RUN: smp-opt %s '--smp-build-gradients=loss=mse:y:target microbatches=2' | FileCheck %s --check-prefix=MB

// smp-build-gradients hands on a step with its gradients, not yet summed
// over the data-parallel ranks nor applied: each gradient is a result
// naming its parameter's argument (smp.grad_of), the backward's ops carry
// smp.bwd, the loss is this rank's share (mean / dp) and, with loss
// scaling, the backward is seeded with loss * @loss_scale (a state starting
// at 8) and the scale used is the output loss_scale.
// CHECK: shard.grid @dp(shape = 2)
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W1:[^:]*]]: tensor<4x4xf32> {smp.param = "w1"}
// CHECK-SAME: %[[W2:[^:]*]]: tensor<4x4xf32> {smp.param = "w2"}
// CHECK-SAME: %[[S:[^:]*]]: tensor<f32> {smp.init = 8.000000e+00 : f32, smp.state = "@loss_scale"}
// CHECK-SAME: %{{[^:]*}}: tensor<2x4xf32> {smp.input = "target"}
// CHECK-SAME: -> (tensor<4x4xf32> {smp.grad_of = 1 : i64}, tensor<4x4xf32> {smp.grad_of = 2 : i64}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "loss_scale"})
// CHECK: %[[USED:.*]] = smp.mul %[[S]], %{{.*}} : (tensor<f32>, tensor<f32>)
// CHECK: %[[MEAN:.*]] = smp.reduce_mean
// CHECK: %[[TWO:.*]] = smp.constant dense<2.000000e+00>
// CHECK: %[[SHARE:.*]] = smp.div %[[MEAN]], %[[TWO]]
// CHECK: smp.mul %[[SHARE]], %[[S]] : (tensor<f32>, tensor<f32>)
// CHECK-NOT: shard.all_reduce
// CHECK: %[[SEED:.*]] = smp.mul %{{.*}}, %[[S]] {smp.bwd}
// CHECK: %[[G2:.*]] = smp.matmul %{{.*}}, %{{.*}} {smp.bwd, transpose_lhs = true}
// CHECK: %[[G1:.*]] = smp.matmul %arg0, %{{.*}} {smp.bwd, transpose_lhs = true}
// CHECK-NOT: shard.all_reduce
// CHECK: return %[[G1]], %[[G2]], %[[SHARE]], %[[USED]]

// A frozen parameter gets no gradient result.
// FREEZE-LABEL: func.func @train_step
// FREEZE-SAME: -> (tensor<4x4xf32> {smp.grad_of = 2 : i64}, tensor<f32> {smp.output = "loss"})

// Two micro-batches: the forward, loss and backward once per micro-batch
// (smp.mb; the backward also smp.bwd), one gradient per parameter summed
// over them. The inputs now hold both micro-batches (the original input
// arguments go: the parameters are arguments 0 and 1).
// MB-LABEL: func.func @train_step
// MB-SAME: %{{[^:]*}}: tensor<4x4xf32> {smp.param = "w1", smp.stage = 0 : i64}
// MB-SAME: %{{[^:]*}}: tensor<4x4xf32> {smp.param = "w2", smp.stage = 0 : i64}
// MB-SAME: %{{[^:]*}}: tensor<4x4xf32> {smp.input = "x"}
// MB-SAME: -> (tensor<4x4xf32> {smp.grad_of = 0 : i64}, tensor<4x4xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"})
// MB: smp.tanh %{{.*}} {smp.mb = 0 : i64}
// MB: smp.tanh %{{.*}} {smp.mb = 1 : i64}
// MB: %[[A:.*]] = smp.matmul %{{.*}} {smp.bwd, smp.mb = 0 : i64, smp.stage = 0 : i64, transpose_lhs = true}
// MB: %[[B:.*]] = smp.matmul %{{.*}} {smp.bwd, smp.mb = 1 : i64, transpose_lhs = true}
// MB: smp.add %[[A]], %[[B]] {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64}
func.func @main(%x: tensor<2x4xf32> {smp.input = "x"},
                %w1: tensor<4x4xf32> {smp.param = "w1"},
                %w2: tensor<4x4xf32> {smp.param = "w2"})
    -> (tensor<2x4xf32> {smp.output = "y"}) {
  %0 = smp.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = smp.tanh %0 : tensor<2x4xf32>
  %2 = smp.matmul %1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %2 : tensor<2x4xf32>
}
