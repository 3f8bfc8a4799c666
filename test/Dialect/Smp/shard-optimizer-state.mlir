// RUN: smp-opt %s -split-input-file -verify-diagnostics --smp-shard-optimizer-state | FileCheck %s

// ZeRO-1 over 2 ranks: each gradient is flattened, zero-padded to a multiple
// of the ranks (15 -> 16 values) and reduce-scattered over @dp; the result
// is this rank's chunk, marked with the parameter's shape.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<8xf32> {smp.grad_of = 1 : i64, smp.layout = #smp.layout<dp = chunk(of = [3, 5])>}, tensor<f32> {smp.output = "loss"})
// CHECK: %[[FLAT:.*]] = smp.reshape %{{.*}} : tensor<3x5xf32> -> tensor<15xf32>
// CHECK: %[[PAD:.*]] = smp.constant dense<0.000000e+00> : tensor<1xf32>
// CHECK: %[[CAT:.*]] = smp.concat %[[FLAT]], %[[PAD]]
// CHECK: %[[MINE:.*]] = shard.reduce_scatter %[[CAT]] on @dp grid_axes = [0] scatter_axis = 0 : tensor<16xf32> -> tensor<8xf32>
// CHECK: return %[[MINE]], %arg0
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%loss: tensor<f32>, %w: tensor<3x5xf32> {smp.param = "w"})
      -> (tensor<3x5xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"}) {
    %0 = smp.mul %w, %w : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    return %0, %loss : tensor<3x5xf32>, tensor<f32>
  }
}

// -----

// expected-error @+1 {{smp-shard-optimizer-state needs data parallelism (a shard.grid @dp of more than one rank: smp-build-gradients{dp=N})}}
module {
  func.func @train_step(%loss: tensor<f32>, %w: tensor<3xf32> {smp.param = "w"})
      -> (tensor<3xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"}) {
    return %w, %loss : tensor<3xf32>, tensor<f32>
  }
}

// -----

// Every pass after smp-build-gradients needs the step it builds.
// expected-error @+1 {{smp-shard-optimizer-state: no func @train_step (run smp-build-gradients first)}}
module {
  shard.grid @dp(shape = 2)
  func.func @main(%x: tensor<3xf32> {smp.input = "x"}) -> (tensor<3xf32> {smp.output = "y"}) {
    return %x : tensor<3xf32>
  }
}
