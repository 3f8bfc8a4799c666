// smp-check-sample-split: under a split batch (dp or micro-batches) it follows the
// samples through the forward (SampleDims.cpp): what the loss reads must be
// computed sample by sample, with the samples along dim 0 where the loss's
// own input (labels, targets) is split along dim 0.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-check-sample-split=loss=mse:y:t dp=2' | FileCheck %s

// Samples kept: a reshape that keeps them outermost ([2, 3, 4] -> [6, 4] ->
// [2, 12]), a transpose there and back, a reduction and a softmax over
// other dims, a matmul by a weight.
// CHECK-LABEL: func.func @main
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<2x12xf32> {smp.output = "y"}) {
    %r = smp.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %m = smp.matmul %r, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    %s = smp.softmax %m {axis = 1 : i64} : tensor<6x4xf32>
    %t = smp.transpose %s {perm = array<i64: 1, 0>} : tensor<6x4xf32> -> tensor<4x6xf32>
    %u = smp.transpose %t {perm = array<i64: 1, 0>} : tensor<4x6xf32> -> tensor<6x4xf32>
    %y = smp.reshape %u : tensor<6x4xf32> -> tensor<2x12xf32>
    return %y : tensor<2x12xf32>
  }
}

// -----

module {
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<2x4xf32> {smp.output = "y"}) {
    %m = smp.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{'smp.reduce_mean' reduces over the batch dim, mixing the batch's samples: under --dp 2 x 1 micro-batch(es) each shard computes it from its own samples only, so the output 'y' that the loss reads would not be the one-device value}}
    %c = smp.reduce_mean %m {axes = array<i64: 0>} : tensor<2x4xf32> -> tensor<1x4xf32>
    %y = smp.sub %m, %c : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// x^T x contracts over the samples.
module {
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}, %w: tensor<4x2xf32> {smp.param = "w"}) -> (tensor<4x2xf32> {smp.output = "y"}) {
    // expected-error @+1 {{'smp.matmul' contracts over the batch dim}}
    %g = smp.matmul %x, %x {transpose_lhs = true} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    %y = smp.matmul %g, %w : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
    return %y : tensor<4x2xf32>
  }
}

// -----

// A reshape that moves the samples off the outermost factor of a dim cannot
// be followed.
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<2x2xf32> {smp.param = "w"}) -> (tensor<3x2xf32> {smp.output = "y"}) {
    // expected-error @+1 {{smp cannot follow the batch's samples through 'smp.reshape', so it cannot tell that the output 'y' that the loss reads is computed sample by sample under --dp 2 x 1 micro-batch(es)}}
    %r = smp.reshape %x : tensor<2x3xf32> -> tensor<3x2xf32>
    %y = smp.matmul %r, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
    return %y : tensor<3x2xf32>
  }
}

// -----

// Samples along dim 1 of the output, but the targets are split along dim 0.
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<3x2xf32> {smp.output = "y"}) {
    %m = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    // expected-error @+1 {{the output 'y' that the loss reads holds the batch's samples along dim 1, but smp splits the batch along dim 0 under --dp 2 x 1 micro-batch(es)}}
    %y = smp.transpose %m {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
    return %y : tensor<3x2xf32>
  }
}

// -----

// Samples interleaved ([seq, batch] flattened to [seq * batch] rows, as
// nn.MultiheadAttention's projections see them) are followed through the
// row-wise matmul and back to [batch, seq, 4].
// CHECK-LABEL: func.func @main
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<2x3x4xf32> {smp.output = "y"}) {
    %t = smp.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
    %r = smp.reshape %t : tensor<3x2x4xf32> -> tensor<6x4xf32>
    %m = smp.matmul %r, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    %b = smp.reshape %m : tensor<6x4xf32> -> tensor<3x2x4xf32>
    %y = smp.transpose %b {perm = array<i64: 1, 0, 2>} : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
    return %y : tensor<2x3x4xf32>
  }
}

// -----

// The same rows as the output: the targets, split along dim 0 in runs of
// samples, would not line up with them.
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<6x4xf32> {smp.output = "y"}) {
    %t = smp.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
    %r = smp.reshape %t : tensor<3x2x4xf32> -> tensor<6x4xf32>
    // expected-error @+1 {{the output 'y' that the loss reads holds the batch's samples along dim 0 interleaved with another dim, but smp splits the batch along dim 0}}
    %m = smp.matmul %r, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    return %m : tensor<6x4xf32>
  }
}

// -----

// A ConvTranspose (smp.conv_grad's input gradient, the output's shape given
// by a constant zero) keeps the samples along dim 0.
// CHECK-LABEL: func.func @main
module {
  func.func @main(%x: tensor<2x3x4x4xf32> {smp.input = "x"}, %w: tensor<3x2x1x1xf32> {smp.param = "w"}) -> (tensor<2x32xf32> {smp.output = "y"}) {
    %z = smp.constant dense<0.0> : tensor<2x2x4x4xf32>
    %g, %wg = smp.conv_grad %z, %w, %x {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : tensor<2x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<2x3x4x4xf32>
    %y = smp.reshape %g : tensor<2x2x4x4xf32> -> tensor<2x32xf32>
    return %y : tensor<2x32xf32>
  }
}

// -----

// Its weight gradient sums over the samples.
module {
  func.func @main(%x: tensor<2x3x4x4xf32> {smp.input = "x"}, %w: tensor<3x2x1x1xf32> {smp.param = "w"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
    %z = smp.constant dense<0.0> : tensor<2x2x4x4xf32>
    // expected-error @+1 {{'smp.conv_grad' reduces over the batch}}
    %g, %wg = smp.conv_grad %z, %w, %x {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : tensor<2x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<2x3x4x4xf32>
    %y = smp.reshape %wg : tensor<3x2x1x1xf32> -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// -----

// A GatherND of constant indices along a dim in front of the samples
// (aten.index on dim 1, which the exporter moves first: Falcon's rotary
// positions) keeps them, in the slices it gathers.
// CHECK-LABEL: func.func @main
module {
  func.func @main(%x: tensor<2x5x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<2x12xf32> {smp.output = "y"}) {
    %i = smp.constant dense<[[4], [0], [2]]> : tensor<3x1xi64>
    %t = smp.transpose %x {perm = array<i64: 1, 0, 2>} : tensor<2x5x4xf32> -> tensor<5x2x4xf32>
    %g = smp.gather_nd %t, %i {batch_dims = 0 : i64} : (tensor<5x2x4xf32>, tensor<3x1xi64>) -> tensor<3x2x4xf32>
    %m = smp.matmul %g, %w : (tensor<3x2x4xf32>, tensor<4x4xf32>) -> tensor<3x2x4xf32>
    %u = smp.transpose %m {perm = array<i64: 1, 0, 2>} : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
    %y = smp.reshape %u : tensor<2x3x4xf32> -> tensor<2x12xf32>
    return %y : tensor<2x12xf32>
  }
}

// -----

// Gathering along the samples' own dim is not followed.
module {
  func.func @main(%x: tensor<2x5x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<2x5x4xf32> {smp.output = "y"}) {
    %i = smp.constant dense<[[1], [0]]> : tensor<2x1xi64>
    // expected-error @+1 {{smp cannot follow the batch's samples through 'smp.gather_nd'}}
    %g = smp.gather_nd %x, %i {batch_dims = 0 : i64} : (tensor<2x5x4xf32>, tensor<2x1xi64>) -> tensor<2x5x4xf32>
    %y = smp.matmul %g, %w : (tensor<2x5x4xf32>, tensor<4x4xf32>) -> tensor<2x5x4xf32>
    return %y : tensor<2x5x4xf32>
  }
}

// -----

// A GatherND whose constant index tuples name the position's own sample
// (HF's padding mask read as mask[arange(B)[:, None], kv], folded): the
// samples stay along dim 0.
// CHECK-LABEL: func.func @main
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
    %i = smp.constant dense<[[[0, 2], [0, 0], [0, 1]], [[1, 2], [1, 0], [1, 1]]]> : tensor<2x3x2xi64>
    %g = smp.gather_nd %x, %i {batch_dims = 0 : i64} : (tensor<2x3xf32>, tensor<2x3x2xi64>) -> tensor<2x3xf32>
    %y = smp.matmul %g, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// -----

// A decoder classifier's pooled logits, logits[arange(B), last_token]: the
// tuples' first component a constant naming the position's own sample
// (the arange, folded), the second computed from that sample (its last
// token that is not padding), concatenated: the samples stay along dim 0.
// CHECK-LABEL: func.func @main
module {
  func.func @main(%x: tensor<2x5x3xf32> {smp.input = "x"}, %ids: tensor<2x5xi64> {smp.input = "ids"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
    %b = smp.constant dense<[[0], [1]]> : tensor<2x1xi64>
    %last = smp.slice %ids {starts = array<i64: 0, 4>, limits = array<i64: 2, 5>, steps = array<i64: 1, 1>} : tensor<2x5xi64> -> tensor<2x1xi64>
    %i = smp.concat %b, %last {axis = -1 : i64} : (tensor<2x1xi64>, tensor<2x1xi64>) -> tensor<2x2xi64>
    %g = smp.gather_nd %x, %i {batch_dims = 0 : i64} : (tensor<2x5x3xf32>, tensor<2x2xi64>) -> tensor<2x3xf32>
    %y = smp.matmul %g, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// -----

// Its first component naming other samples' rows (reversed) mixes them.
module {
  func.func @main(%x: tensor<2x5x3xf32> {smp.input = "x"}, %ids: tensor<2x5xi64> {smp.input = "ids"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
    %b = smp.constant dense<[[1], [0]]> : tensor<2x1xi64>
    %last = smp.slice %ids {starts = array<i64: 0, 4>, limits = array<i64: 2, 5>, steps = array<i64: 1, 1>} : tensor<2x5xi64> -> tensor<2x1xi64>
    %i = smp.concat %b, %last {axis = -1 : i64} : (tensor<2x1xi64>, tensor<2x1xi64>) -> tensor<2x2xi64>
    // expected-error @+1 {{smp cannot follow the batch's samples through 'smp.gather_nd'}}
    %g = smp.gather_nd %x, %i {batch_dims = 0 : i64} : (tensor<2x5x3xf32>, tensor<2x2xi64>) -> tensor<2x3xf32>
    %y = smp.matmul %g, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// -----

// One that names another sample's row mixes them.
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
    %i = smp.constant dense<[[[0, 2], [0, 0], [0, 1]], [[1, 2], [0, 0], [1, 1]]]> : tensor<2x3x2xi64>
    // expected-error @+1 {{smp cannot follow the batch's samples through 'smp.gather_nd'}}
    %g = smp.gather_nd %x, %i {batch_dims = 0 : i64} : (tensor<2x3xf32>, tensor<2x3x2xi64>) -> tensor<2x3xf32>
    %y = smp.matmul %g, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// -----

// ONNX's negative axes count from the end: ConvNeXt's pooler, the mean over
// [-2, -1] of [N, C, H, W] and a layer norm at axis -1, keeps the samples
// (it was refused: the raw axes moved the samples to dim -2).
// CHECK-LABEL: func.func @main
// CHECK: smp.reduce_mean
module {
  func.func @main(%x: tensor<2x4x3x3xf32> {smp.input = "x"}, %s: tensor<4xf32> {smp.param = "s"}, %b: tensor<4xf32> {smp.param = "b"}, %w: tensor<4x2xf32> {smp.param = "w"}) -> (tensor<2x2xf32> {smp.output = "y"}) {
    %m = smp.reduce_mean %x {axes = array<i64: -2, -1>, keepdims = false} : tensor<2x4x3x3xf32> -> tensor<2x4xf32>
    %n = smp.layer_norm %m, %s, %b {axis = -1 : i64, epsilon = 1.0e-6 : f32} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %y = smp.matmul %n, %w : (tensor<2x4xf32>, tensor<4x2xf32>) -> tensor<2x2xf32>
    return %y : tensor<2x2xf32>
  }
}

// -----

// A negative axis that is the sample dim still mixes the samples.
module {
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<2x4xf32> {smp.output = "y"}) {
    %m = smp.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{'smp.reduce_sum' reduces over the batch dim, mixing the batch's samples}}
    %c = smp.reduce_sum %m {axes = array<i64: -2>, keepdims = true} : tensor<2x4xf32> -> tensor<1x4xf32>
    %y = smp.sub %m, %c : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

module {
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<2x4xf32> {smp.output = "y"}) {
    %m = smp.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{'smp.softmax' normalises along the batch dim}}
    %y = smp.softmax %m {axis = -2 : i64} : tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}

// -----

// A gather along the flattened samples whose constant indices pick each
// position's own sample's rows (as_strided, AdaptiveAvgPool1d's view in
// Swin's pooler: [2, 3] flattened to [6], indices [2, 3]) keeps them.
// CHECK-LABEL: func.func @main
// CHECK: smp.gather
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
    %m = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %f = smp.reshape %m : tensor<2x3xf32> -> tensor<6xf32>
    %i = smp.constant dense<[[2, 1, 0], [5, 4, 3]]> : tensor<2x3xi64>
    %y = smp.gather %f, %i {axis = 0 : i64} : (tensor<6xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// -----

// One index that reaches into the other sample mixes them.
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3x3xf32> {smp.param = "w"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
    %m = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %f = smp.reshape %m : tensor<2x3xf32> -> tensor<6xf32>
    %i = smp.constant dense<[[2, 1, 0], [5, 4, 2]]> : tensor<2x3xi64>
    // expected-error @+1 {{'smp.gather' gathers along the batch dim, mixing the batch's samples}}
    %y = smp.gather %f, %i {axis = 0 : i64} : (tensor<6xf32>, tensor<2x3xi64>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}

// -----

// One sample a shard (a micro-batch of 1): a reshape that drops or adds the
// batch's dim of size 1 beside the heads' dim (Funnel's relative shift:
// [heads, 1, q, k] -> [heads, q, k] -> back) keeps the sample in the size-1
// dim, not in the heads' (outermost) one, so it meets the value that
// holds it along dim 0 again. Funnel's optimize=False export had been
// refused under --dp 4 --microbatches 2 of a batch of 8.
// CHECK-LABEL: func.func @main
module {
  func.func @main(%x: tensor<1x8x2x8xf32> {smp.input = "x"}, %w: tensor<2x8x8xf32> {smp.param = "w"}) -> (tensor<1x2x8x8xf32> {smp.output = "y"}) {
    %h = smp.transpose %x {perm = array<i64: 2, 0, 1, 3>} : tensor<1x8x2x8xf32> -> tensor<2x1x8x8xf32>
    %r = smp.reshape %h : tensor<2x1x8x8xf32> -> tensor<2x8x8xf32>
    %m = smp.matmul %r, %w : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
    %b = smp.reshape %m : tensor<2x8x8xf32> -> tensor<2x1x8x8xf32>
    %t = smp.transpose %b {perm = array<i64: 1, 0, 2, 3>} : tensor<2x1x8x8xf32> -> tensor<1x2x8x8xf32>
    %s = smp.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<1x8x2x8xf32> -> tensor<1x2x8x8xf32>
    %y = smp.add %t, %s : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
    return %y : tensor<1x2x8x8xf32>
  }
}

// -----

// And a reduction over that dim still mixes the batch's samples.
module {
  func.func @main(%x: tensor<1x8x2x8xf32> {smp.input = "x"}, %w: tensor<2x8x8xf32> {smp.param = "w"}) -> (tensor<1x2x8x8xf32> {smp.output = "y"}) {
    %h = smp.transpose %x {perm = array<i64: 2, 0, 1, 3>} : tensor<1x8x2x8xf32> -> tensor<2x1x8x8xf32>
    %r = smp.reshape %h : tensor<2x1x8x8xf32> -> tensor<2x8x8xf32>
    %m = smp.matmul %r, %w : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
    %b = smp.reshape %m : tensor<2x8x8xf32> -> tensor<2x1x8x8xf32>
    // expected-error @+1 {{'smp.reduce_sum' reduces over the batch dim, mixing the batch's samples}}
    %c = smp.reduce_sum %b {axes = array<i64: 1>, keepdims = true} : tensor<2x1x8x8xf32> -> tensor<2x1x8x8xf32>
    %t = smp.transpose %c {perm = array<i64: 1, 0, 2, 3>} : tensor<2x1x8x8xf32> -> tensor<1x2x8x8xf32>
    return %t : tensor<1x2x8x8xf32>
  }
}
