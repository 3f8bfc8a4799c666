// RUN: smp-opt %s -split-input-file -verify-diagnostics --smp-shard-optimizer-state | FileCheck %s
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-shard-optimizer-state=bucket-mb=0' | FileCheck %s --check-prefix=ONE

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

// A step unrolled over 2 micro-batches: unlike ZeRO-2 (shard-gradients.mlir)
// the gradients are summed whole over the micro-batches, and the sums of w
// (15 values, padded to 16) and v (4) form one bucket, reduce-scattered once
// right after the last sum with its marks (the last micro-batch's
// backward): each flattened, padded and viewed as [2, n/2], concatenated
// along dim 1, and each rank's [8 + 2] values sliced back into its chunks
// of w and v as views.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<8xf32> {smp.grad_of = 1 : i64, smp.layout = #smp.layout<dp = chunk(of = [3, 5])>}, tensor<2xf32> {smp.grad_of = 2 : i64, smp.layout = #smp.layout<dp = chunk(of = [4])>}, tensor<f32> {smp.output = "loss"})
// CHECK: %[[ACC:.*]] = smp.add %{{[0-9]+}}, %{{[0-9]+}} {smp.bwd, smp.mb = 1 : i64} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK-NOT: shard.reduce_scatter
// CHECK: %[[HACC:.*]] = smp.add %{{[0-9]+}}, %{{[0-9]+}} {smp.bwd, smp.mb = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: smp.reshape %[[ACC]] {smp.bwd, smp.mb = 1 : i64} : tensor<3x5xf32> -> tensor<15xf32>
// CHECK: %[[V:.*]] = smp.reshape %[[HACC]] {smp.bwd, smp.mb = 1 : i64} : tensor<4xf32> -> tensor<2x2xf32>
// CHECK: %[[CAT:.*]] = smp.concat %{{.*}}, %[[V]] {axis = 1 : i64, smp.bwd, smp.mb = 1 : i64} : (tensor<2x8xf32>, tensor<2x2xf32>) -> tensor<2x10xf32>
// CHECK: %[[FLAT:.*]] = smp.reshape %[[CAT]] {{.*}} -> tensor<20xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[FLAT]] on @dp grid_axes = [0] scatter_axis = 0 {smp.bwd, smp.mb = 1 : i64} : tensor<20xf32> -> tensor<10xf32>
// CHECK: %[[W:.*]] = smp.slice %[[RS]] {limits = array<i64: 8>, smp.bwd, smp.mb = 1 : i64, smp.view, starts = array<i64: 0>
// CHECK: %[[VC:.*]] = smp.slice %[[RS]] {limits = array<i64: 10>, smp.bwd, smp.mb = 1 : i64, smp.view, starts = array<i64: 8>
// CHECK-NOT: shard.reduce_scatter
// CHECK: return %[[W]], %[[VC]], %arg0

// With bucket-mb=0 each gradient's sum has its own reduce-scatter: 2 (one
// in the first case).
// ONE-LABEL: func.func @train_step
// ONE-COUNT-1: shard.reduce_scatter
// ONE-NOT: shard.reduce_scatter
// ONE-LABEL: func.func @train_step
// ONE-COUNT-2: shard.reduce_scatter
// ONE-NOT: shard.reduce_scatter
// ONE: return
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%loss: tensor<f32>, %w: tensor<3x5xf32> {smp.param = "w"}, %v: tensor<4xf32> {smp.param = "v"})
      -> (tensor<3x5xf32> {smp.grad_of = 1 : i64}, tensor<4xf32> {smp.grad_of = 2 : i64}, tensor<f32> {smp.output = "loss"}) {
    %g0 = smp.mul %w, %w {smp.bwd, smp.mb = 0 : i64} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    %h0 = smp.mul %v, %v {smp.bwd, smp.mb = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %g1 = smp.add %w, %w {smp.bwd, smp.mb = 1 : i64} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    %acc = smp.add %g0, %g1 {smp.bwd, smp.mb = 1 : i64} : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
    %h1 = smp.mul %v, %v {smp.bwd, smp.mb = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %hacc = smp.add %h0, %h1 {smp.bwd, smp.mb = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %acc, %hacc, %loss : tensor<3x5xf32>, tensor<4xf32>, tensor<f32>
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
