// RUN: smp-opt %s -split-input-file -verify-diagnostics --smp-shard-parameters | FileCheck %s
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-shard-parameters=prefetch=1' | FileCheck %s --check-prefix=AHEAD

// ZeRO-3 over 2 ranks, one micro-batch. w (3x5: 15 values, padded to 16)
// becomes an 8-element chunk with the dp chunk layout (beside its tp
// split); b (4 values) a 2-element chunk. The forward and the backward each
// gather their own copy right before their first use (the backward's copy
// marked smp.bwd), so no whole w lives from the forward to the backward;
// the gathers are numbered (smp.copy) so that CSE cannot merge them.
// The transpose made from w alone is redone on each copy, and the original
// is gone. The gradient results (ZeRO-2 chunks already) are untouched.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg1: tensor<8xf32> {smp.layout = #smp.layout<tp = split(dim = 1), dp = chunk(of = [3, 5])>, smp.param = "w"}
// CHECK-SAME: %arg2: tensor<2xf32> {smp.layout = #smp.layout<dp = chunk(of = [4])>, smp.param = "b"}
// CHECK: %[[G:.*]] = shard.all_gather %arg1 on @dp grid_axes = [0] gather_axis = 0 {smp.copy = 0 : i64} : tensor<8xf32> -> tensor<16xf32>
// CHECK: %[[S:.*]] = smp.slice %[[G]] {limits = array<i64: 15>
// CHECK: %[[W:.*]] = smp.reshape %[[S]] : tensor<15xf32> -> tensor<3x5xf32>
// CHECK: %[[T:.*]] = smp.transpose %[[W]]
// CHECK: smp.matmul %arg0, %[[T]]
// CHECK: %[[GB:.*]] = shard.all_gather %arg2 {{.*}}{smp.copy = 1 : i64} : tensor<2xf32> -> tensor<4xf32>
// CHECK: smp.add %{{.*}}, %[[GB]]
// CHECK: %[[G2:.*]] = shard.all_gather %arg1 {{.*}}{smp.bwd, smp.copy = 2 : i64} : tensor<8xf32> -> tensor<16xf32>
// CHECK: %[[S2:.*]] = smp.slice %[[G2]] {limits = array<i64: 15>, smp.bwd
// CHECK: %[[W2:.*]] = smp.reshape %[[S2]] {smp.bwd} : tensor<15xf32> -> tensor<3x5xf32>
// CHECK: %[[T2:.*]] = smp.transpose %[[W2]] {{{.*}}smp.bwd}
// CHECK: smp.matmul %{{.*}}, %[[T2]] {smp.bwd}
// CHECK-NOT: shard.all_gather
// CHECK: return

// With prefetch=1 each gather runs before the first use of the one before
// it: all three gathers precede the forward's first product.
// AHEAD-LABEL: func.func @train_step
// AHEAD: shard.all_gather %arg1
// AHEAD: shard.all_gather %arg2
// AHEAD: smp.matmul %arg0
// AHEAD: shard.all_gather %arg1
// AHEAD: smp.add
module {
  shard.grid @dp(shape = 2)
  shard.grid @tp(shape = 1)
  func.func @train_step(%x: tensor<2x5xf32> {smp.input = "x"},
      %w: tensor<3x5xf32> {smp.param = "w", smp.layout = #smp.layout<tp = split(dim = 1)>},
      %b: tensor<4xf32> {smp.param = "b"}, %g: tensor<8xf32>, %gb: tensor<2xf32>)
      -> (tensor<8xf32> {smp.grad_of = 1 : i64, smp.layout = #smp.layout<dp = chunk(of = [3, 5])>},
          tensor<2xf32> {smp.grad_of = 2 : i64, smp.layout = #smp.layout<dp = chunk(of = [4])>},
          tensor<2x4xf32> {smp.output = "y"}) {
    %t = smp.transpose %w {perm = array<i64: 1, 0>} : tensor<3x5xf32> -> tensor<5x3xf32>
    %y = smp.matmul %x, %t : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
    %c = smp.constant dense<0.0> : tensor<2x1xf32>
    %y4 = smp.concat %y, %c {axis = 1 : i64} : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %z = smp.add %y4, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %d = smp.matmul %x, %t {smp.bwd} : (tensor<2x5xf32>, tensor<5x3xf32>) -> tensor<2x3xf32>
    return %g, %gb, %z : tensor<8xf32>, tensor<2xf32>, tensor<2x4xf32>
  }
}

// -----

// Mixed precision, two micro-batches: the cast of w to bf16 is applied to
// the chunk and the gather moves bf16. Each micro-batch's forward and
// backward gathers its own copy, with its marks.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %arg1: tensor<3xf32> {smp.layout = #smp.layout<dp = chunk(of = [2, 3])>, smp.param = "w"}
// CHECK: %[[L0:.*]] = smp.cast %arg1 {smp.mb = 0 : i64} : tensor<3xf32> to tensor<3xbf16>
// CHECK: shard.all_gather %[[L0]] {{.*}}{smp.copy = 0 : i64, smp.mb = 0 : i64} : tensor<3xbf16> -> tensor<6xbf16>
// CHECK: smp.mul {{.*}}{smp.mb = 0 : i64}
// CHECK: %[[L1:.*]] = smp.cast %arg1 {smp.bwd, smp.mb = 0 : i64}
// CHECK: shard.all_gather %[[L1]] {{.*}}{smp.bwd, smp.copy = 1 : i64, smp.mb = 0 : i64} : tensor<3xbf16> -> tensor<6xbf16>
// CHECK: smp.mul {{.*}}{smp.bwd, smp.mb = 0 : i64}
// CHECK: shard.all_gather {{.*}}{smp.copy = 2 : i64, smp.mb = 1 : i64} : tensor<3xbf16> -> tensor<6xbf16>
// CHECK: shard.all_gather {{.*}}{smp.bwd, smp.copy = 3 : i64, smp.mb = 1 : i64} : tensor<3xbf16> -> tensor<6xbf16>
// CHECK-NOT: tensor<2x3xf32> to tensor<2x3xbf16>
// CHECK: return
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%x: tensor<2x3xbf16> {smp.input = "x"},
      %w: tensor<2x3xf32> {smp.param = "w"}, %g: tensor<3xf32>)
      -> (tensor<3xf32> {smp.grad_of = 1 : i64, smp.layout = #smp.layout<dp = chunk(of = [2, 3])>},
          tensor<2x3xbf16> {smp.output = "y"}) {
    %c = smp.cast %w : tensor<2x3xf32> to tensor<2x3xbf16>
    %y0 = smp.mul %x, %c {smp.mb = 0 : i64} : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xbf16>
    %d0 = smp.mul %y0, %c {smp.bwd, smp.mb = 0 : i64} : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xbf16>
    %y1 = smp.mul %d0, %c {smp.mb = 1 : i64} : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xbf16>
    %d1 = smp.mul %y1, %c {smp.bwd, smp.mb = 1 : i64} : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xbf16>
    return %g, %d1 : tensor<3xf32>, tensor<2x3xbf16>
  }
}

// -----

// A weight-only op of the backward that reads a constant made after the
// backward's first use of w (BiT's standardised weight: batch_norm's
// backward over w alone, its epsilon a constant of the backward): redone on
// the backward's copy, where the gather runs, with a copy of the constant
// there (the original does not dominate that point).
// CHECK-LABEL: func.func @train_step
// CHECK: shard.all_gather %arg1 {{.*}}{smp.copy = 0 : i64}
// CHECK: smp.mul %arg0
// CHECK: %[[G:.*]] = shard.all_gather %arg1 {{.*}}{smp.bwd, smp.copy = 1 : i64}
// CHECK: %[[W:.*]] = smp.slice %[[G]]
// CHECK: %[[E:.*]] = smp.constant {smp.bwd} dense<9.99999993E-9> : tensor<f32>
// CHECK: %[[S:.*]] = smp.add %[[W]], %[[E]] {smp.bwd}
// CHECK: %[[D:.*]] = smp.mul %{{.*}}, %[[W]] {smp.bwd}
// CHECK: smp.mul %[[D]], %[[S]] {smp.bwd}
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%x: tensor<3xf32> {smp.input = "x"},
      %w: tensor<3xf32> {smp.param = "w"}, %g: tensor<2xf32>)
      -> (tensor<2xf32> {smp.grad_of = 1 : i64, smp.layout = #smp.layout<dp = chunk(of = [3])>},
          tensor<3xf32> {smp.output = "y"}) {
    %y = smp.mul %x, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %d = smp.mul %y, %w {smp.bwd} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %eps = smp.constant dense<1.0e-8> : tensor<f32>
    %s = smp.add %w, %eps {smp.bwd} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
    %e = smp.mul %d, %s {smp.bwd} : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return %g, %e : tensor<2xf32>, tensor<3xf32>
  }
}

// -----

// expected-error @+1 {{smp-shard-parameters needs data parallelism (a shard.grid @dp of more than one rank: smp-build-gradients{dp=N})}}
module {
  func.func @train_step(%loss: tensor<f32>, %w: tensor<3xf32> {smp.param = "w"})
      -> (tensor<3xf32> {smp.grad_of = 1 : i64}, tensor<f32> {smp.output = "loss"}) {
    return %w, %loss : tensor<3xf32>, tensor<f32>
  }
}

// -----

// expected-error @+1 {{smp-shard-parameters: no func @train_step (run smp-build-gradients first)}}
module {
  shard.grid @dp(shape = 2)
}
