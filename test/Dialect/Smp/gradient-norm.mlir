// RUN: smp-opt %s -split-input-file --smp-gradient-norm | FileCheck %s
// RUN: smp-opt %s -split-input-file '--smp-gradient-norm=clip-grad-norm=0.5' | FileCheck %s --check-prefix=CLIP

// The global norm of the gradients: a tied weight's copies on two pipeline
// stages (the same smp.param, the same summed gradient) count once; squares
// are summed per stage, then over the stages; a tensor-parallel slice's
// squares are summed over @tp.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> ({{.*}}, tensor<f32> {smp.output = "grad_norm"})
// CHECK: %[[SQ0:.*]] = smp.mul %arg1, %arg1 : (tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[S0:.*]] = smp.reduce_sum %[[SQ0]]
// CHECK-NOT: smp.mul %arg2, %arg2
// CHECK: %[[SQ3:.*]] = smp.mul %arg3, %arg3 : (tensor<2xf32>, tensor<2xf32>)
// CHECK: %[[S3:.*]] = smp.reduce_sum %[[SQ3]]
// CHECK: %[[TP:.*]] = shard.all_reduce %[[S3]] on @tp
// CHECK: %[[SUM:.*]] = smp.add %[[S0]], %[[TP]]
// CHECK: %[[NORM:.*]] = smp.sqrt %[[SUM]]
// CHECK: return %arg1, %arg2, %arg3, %arg0, %[[NORM]]
// Clipping: coef = min(1, 0.5 / (norm + 1e-6)) scales every gradient.
// CLIP-LABEL: func.func @train_step
// CLIP: %[[NORM:.*]] = smp.sqrt
// CLIP: %[[DEN:.*]] = smp.add %[[NORM]], %{{.*}}
// CLIP: %[[Q:.*]] = smp.div %{{.*}}, %[[DEN]]
// CLIP: %[[COEF:.*]] = smp.min %[[Q]], %{{.*}}
// CLIP: %[[C1:.*]] = smp.mul %arg1, %[[COEF]]
// CLIP: %[[C2:.*]] = smp.mul %arg2, %[[COEF]]
// CLIP: %[[C3:.*]] = smp.mul %arg3, %[[COEF]]
// CLIP: return %[[C1]], %[[C2]], %[[C3]], %arg0, %[[NORM]]
module {
  shard.grid @tp(shape = 2)
  func.func @train_step(%loss: tensor<f32>,
                        %e0: tensor<4xf32> {smp.param = "e", smp.stage = 0 : i64},
                        %e1: tensor<4xf32> {smp.param = "e", smp.stage = 0 : i64},
                        %w: tensor<2xf32> {smp.layout = #smp.layout<tp = split(dim = 0)>, smp.param = "w"})
      -> (tensor<4xf32> {smp.grad_of = 1 : i64}, tensor<4xf32> {smp.grad_of = 2 : i64},
          tensor<2xf32> {smp.grad_of = 3 : i64}, tensor<f32> {smp.output = "loss"}) {
    return %e0, %e1, %w, %loss : tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<f32>
  }
}

// -----

// No gradient at all: the norm is 0.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[ZERO:.*]] = smp.constant dense<0.000000e+00> : tensor<f32>
// CHECK: return %arg0, %[[ZERO]]
func.func @train_step(%loss: tensor<f32>) -> (tensor<f32> {smp.output = "loss"}) {
  return %loss : tensor<f32>
}
