// RUN: smp-opt %s -split-input-file -verify-diagnostics --smp-shard-gradients | FileCheck %s
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-shard-gradients=bucket-mb=0' | FileCheck %s --check-prefix=ONE

// ZeRO-2 over 2 ranks, a step unrolled over 2 micro-batches. Each micro-
// batch's gradients of w (15 values, padded to 16) and v (4) form one bucket:
// each flattened, padded and viewed as [2, n/2], concatenated along dim 1 and
// reduce-scattered right after the micro-batch's last gradient, with its
// marks; each rank's [8 + 2] values are sliced back into its chunk of w and
// of v. The sums over micro-batches are taken on the chunks, and the whole
// sums are gone.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<8xf32> {smp.grad_of = 1 : i64, smp.layout = #smp.layout<dp = chunk(of = [3, 5])>}, tensor<2xf32> {smp.grad_of = 2 : i64, smp.layout = #smp.layout<dp = chunk(of = [4])>}, tensor<f32> {smp.output = "loss"})
// CHECK: %[[H0:.*]] = smp.mul %arg2, %arg2 {smp.bwd, smp.mb = 0 : i64}
// CHECK: smp.concat {{.*}} {axis = 0 : i64, smp.bwd, smp.mb = 0 : i64} : (tensor<15xf32>, tensor<1xf32>) -> tensor<16xf32>
// CHECK: %[[V0:.*]] = smp.reshape %[[H0]] {smp.bwd, smp.mb = 0 : i64} : tensor<4xf32> -> tensor<2x2xf32>
// CHECK: %[[CAT0:.*]] = smp.concat %{{.*}}, %[[V0]] {axis = 1 : i64, smp.bwd, smp.mb = 0 : i64} : (tensor<2x8xf32>, tensor<2x2xf32>) -> tensor<2x10xf32>
// CHECK: %[[FLAT0:.*]] = smp.reshape %[[CAT0]] {{.*}} -> tensor<20xf32>
// CHECK: %[[RS0:.*]] = shard.reduce_scatter %[[FLAT0]] on @dp grid_axes = [0] scatter_axis = 0 {smp.bwd, smp.mb = 0 : i64} : tensor<20xf32> -> tensor<10xf32>
// CHECK: %[[W0:.*]] = smp.slice %[[RS0]] {limits = array<i64: 8>, smp.bwd, smp.mb = 0 : i64, smp.view, starts = array<i64: 0>
// CHECK: %[[VC0:.*]] = smp.slice %[[RS0]] {limits = array<i64: 10>, smp.bwd, smp.mb = 0 : i64, smp.view, starts = array<i64: 8>
// CHECK: %[[RS1:.*]] = shard.reduce_scatter %{{.*}} {smp.bwd, smp.mb = 1 : i64} : tensor<20xf32> -> tensor<10xf32>
// CHECK: %[[W1:.*]] = smp.slice %[[RS1]] {limits = array<i64: 8>
// CHECK: %[[W:.*]] = smp.add %[[W0]], %[[W1]] {smp.bwd, smp.mb = 1 : i64} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK: %[[VC1:.*]] = smp.slice %[[RS1]] {limits = array<i64: 10>
// CHECK: %[[V:.*]] = smp.add %[[VC0]], %[[VC1]] {smp.bwd, smp.mb = 1 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK-NOT: tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK: return %[[W]], %[[V]], %arg0

// With bucket-mb=0 every gradient part has its own reduce-scatter: 4.
// ONE-LABEL: func.func @train_step
// ONE-COUNT-4: shard.reduce_scatter
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

// A weight on two pipeline stages (a tied embedding and LM head): each
// copy's gradient is the sum of both copies' in stage order. Each copy's
// part is reduce-scattered on its own stage; both sums add the same two
// chunks in the same order, on their own stage, so the copies stay equal.
// An add inside one micro-batch's backward (same micro-batch, same stage)
// is one part, reduce-scattered whole.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[P0:.*]] = smp.add %arg1, %arg1 {smp.bwd, smp.mb = 0 : i64, smp.stage = 0 : i64}
// CHECK: %[[RS0:.*]] = shard.reduce_scatter %[[P0]] {{.*}}smp.stage = 0 : i64} : tensor<4xf32> -> tensor<2xf32>
// CHECK: %[[RS1:.*]] = shard.reduce_scatter %{{.*}}smp.stage = 1 : i64} : tensor<4xf32> -> tensor<2xf32>
// CHECK: %[[S0:.*]] = smp.add %[[RS0]], %[[RS1]] {smp.stage = 0 : i64}
// CHECK: %[[S1:.*]] = smp.add %[[RS0]], %[[RS1]] {smp.stage = 1 : i64}
// CHECK: return %[[S0]], %[[S1]], %arg0
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%loss: tensor<f32>, %a: tensor<4xf32> {smp.param = "e"}, %b: tensor<4xf32> {smp.param = "e"})
      -> (tensor<4xf32> {smp.grad_of = 1 : i64}, tensor<4xf32> {smp.grad_of = 2 : i64}, tensor<f32> {smp.output = "loss"}) {
    %ga = smp.add %a, %a {smp.bwd, smp.mb = 0 : i64, smp.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %gb = smp.mul %b, %b {smp.bwd, smp.mb = 0 : i64, smp.stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %sa = smp.add %ga, %gb {smp.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %sb = smp.add %ga, %gb {smp.stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %sa, %sb, %loss : tensor<4xf32>, tensor<4xf32>, tensor<f32>
  }
}

// -----

// expected-error @+1 {{smp-shard-gradients needs data parallelism (a shard.grid @dp of more than one rank: smp-build-gradients{dp=N})}}
module {
  func.func @train_step(%loss: tensor<f32>, %w: tensor<3xf32> {smp.param = "w"})
      -> (tensor<3xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"}) {
    return %w, %loss : tensor<3xf32>, tensor<f32>
  }
}

// -----

// expected-error @+1 {{smp-shard-gradients: no func @train_step (run smp-build-gradients first)}}
module {
  shard.grid @dp(shape = 2)
  func.func @main(%x: tensor<3xf32> {smp.input = "x"}) -> (tensor<3xf32> {smp.output = "y"}) {
    return %x : tensor<3xf32>
  }
}
