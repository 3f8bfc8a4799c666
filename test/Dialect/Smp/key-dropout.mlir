// smp-key-dropout (KeyDropout.cpp): each smp.dropout learns where its
// tensor sits among the global batch's samples, so that every plan draws
// the one mask of one device: `samples` (the micro-batch) and
// `shard_samples` (micro-batch x micro-batches: a rank's samples in a step)
// where the input holds the samples sample-major along dim 0, none where it
// holds no samples; the draw on ones of a Dropout's mask output (same
// stream) is placed as the Dropout. Under a split batch a dropout of a value
// that holds its samples otherwise is refused: its mask could not be placed.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-key-dropout=dp=2 microbatches=3' | FileCheck %s
// RUN: smp-opt %s -split-input-file '--smp-key-dropout=dp=1 microbatches=1' 2>&1 | FileCheck %s --check-prefix=ONE

// CHECK-LABEL: func.func @main
// CHECK: smp.dropout %{{.*}} {ratio = 1.000000e-01 : f32, samples = 2 : i64, shard_samples = 6 : i64, stream = 0 : i64} : tensor<2x3x4xf32>
// CHECK: smp.dropout %{{.*}} {ratio = 1.000000e-01 : f32, samples = 2 : i64, shard_samples = 6 : i64, stream = 0 : i64} : tensor<2x3x4xf32>
// Rows of the samples ([2 x 3, 4]: 3 rows per sample) are sample-major.
// CHECK: smp.dropout %{{.*}} {ratio = 2.000000e-01 : f32, samples = 2 : i64, shard_samples = 6 : i64, stream = 1 : i64} : tensor<6x4xf32>
// A weight holds no samples: one mask for all of them.
// CHECK: smp.dropout %{{.*}} {ratio = 5.000000e-01 : f32, stream = 2 : i64} : tensor<4x4xf32>
// ONE-LABEL: func.func @main
// ONE: samples = 2 : i64, shard_samples = 2 : i64, stream = 0 : i64
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<2x3x4xf32> {smp.output = "y"}, tensor<2x3x4xi1> {smp.output = "mask"}, tensor<6x4xf32> {smp.output = "z"}) {
    %d = smp.dropout %x {ratio = 0.1 : f32, stream = 0 : i64} : tensor<2x3x4xf32>
    %one = smp.constant dense<1.0> : tensor<2x3x4xf32>
    %m = smp.dropout %one {ratio = 0.1 : f32, stream = 0 : i64} : tensor<2x3x4xf32>
    %zero = smp.constant dense<0.0> : tensor<2x3x4xf32>
    %dropped = smp.equal %m, %zero : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xi1>
    %mask = smp.not %dropped : tensor<2x3x4xi1>
    %r = smp.reshape %d : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %rd = smp.dropout %r {ratio = 0.2 : f32, stream = 1 : i64} : tensor<6x4xf32>
    %wd = smp.dropout %w {ratio = 0.5 : f32, stream = 2 : i64} : tensor<4x4xf32>
    %z = smp.matmul %rd, %wd : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    return %d, %mask, %z : tensor<2x3x4xf32>, tensor<2x3x4xi1>, tensor<6x4xf32>
  }
}

// -----

// The samples interleaved with another dim ([3 x 2, 4] from a [3, 2, 4]
// value: a sequence-first layout): refused under dp 2 x 3 micro-batches.
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}) -> (tensor<6x4xf32> {smp.output = "y"}) {
    %t = smp.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
    // expected-error @+1 {{the input of this dropout (its random mask is drawn for the global batch, sample by sample) holds the batch's samples along dim 0 interleaved with another dim, but smp splits the batch along dim 0 under --dp 2 x 3 micro-batch(es)}}
    %r = smp.reshape %t : tensor<3x2x4xf32> -> tensor<6x4xf32>
    %d = smp.dropout %r {ratio = 0.1 : f32, stream = 0 : i64} : tensor<6x4xf32>
    return %d : tensor<6x4xf32>
  }
}

// -----

// A mean over the batch: refused too.
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}) -> (tensor<3xf32> {smp.output = "y"}) {
    // expected-error @+1 {{'smp.reduce_mean' }}
    %m = smp.reduce_mean %x {axes = array<i64: 0>, keepdims = false} : tensor<2x3xf32> -> tensor<3xf32>
    %d = smp.dropout %m {ratio = 0.1 : f32, stream = 0 : i64} : tensor<3xf32>
    return %d : tensor<3xf32>
  }
}

// -----

// An attention's dropout on its probabilities ([B, H, S, Sk]) is placed as
// its query's samples lead; an attention without dropout is left alone.
// CHECK-LABEL: func.func @main
// CHECK: smp.attention {{.*}} {ratio = 1.000000e-01 : f32, samples = 2 : i64, scale = 5.000000e-01 : f32, shard_samples = 6 : i64, stream = 4 : i64}
// CHECK: smp.attention {{.*}} {scale = 5.000000e-01 : f32}
module {
  func.func @main(%q: tensor<2x2x3x4xf32> {smp.input = "q"}) -> (tensor<2x2x3x4xf32> {smp.output = "y"}, tensor<2x2x3x4xf32> {smp.output = "z"}) {
    %o, %l = smp.attention %q, %q, %q {ratio = 0.1 : f32, scale = 0.5 : f32, stream = 4 : i64} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> (tensor<2x2x3x4xf32>, tensor<2x2x3x2xf32>)
    %o2, %l2 = smp.attention %q, %q, %q {scale = 0.5 : f32} : (tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>) -> (tensor<2x2x3x4xf32>, tensor<2x2x3x2xf32>)
    return %o, %o2 : tensor<2x2x3x4xf32>, tensor<2x2x3x4xf32>
  }
}

// -----

// An attention whose query holds the samples along dim 1 (a
// sequence-first layout): its dropout cannot be placed under dp 2 x 3
// micro-batches, refused naming the attention.
module {
  func.func @main(%x: tensor<2x3x4x4xf32> {smp.input = "x"}) -> (tensor<3x2x4x4xf32> {smp.output = "y"}) {
    // expected-error @+1 {{the query of this attention (the random mask of its dropout is drawn for the global batch, sample by sample) holds the batch's samples along dim 1, but smp splits the batch along dim 0 under --dp 2 x 3 micro-batch(es)}}
    %q = smp.transpose %x {perm = array<i64: 1, 0, 2, 3>} : tensor<2x3x4x4xf32> -> tensor<3x2x4x4xf32>
    %o, %l = smp.attention %q, %q, %q {ratio = 0.1 : f32, scale = 0.5 : f32, stream = 0 : i64} : (tensor<3x2x4x4xf32>, tensor<3x2x4x4xf32>, tensor<3x2x4x4xf32>) -> (tensor<3x2x4x4xf32>, tensor<3x2x4x2xf32>)
    return %o : tensor<3x2x4x4xf32>
  }
}
