// smp-mark-sample-outputs: which outputs of a forward hold the batch's
// samples along dim 0, each computed from its own sample only (SampleDims):
// smprun runs such a model over a dataset batch by batch and concatenates
// them. Any other output says why not.
// RUN: smp-opt %s -split-input-file --smp-mark-sample-outputs | FileCheck %s

// Per sample: a matmul by a weight, a softmax over the features, a reshape
// that keeps the samples outermost ([2, 3, 4] -> [6, 4]: sample-major runs
// of 3 rows). Mixed: a mean over the batch. None: a parameter's own value.
// CHECK-LABEL: func.func @main
// CHECK-SAME: {smp.output = "y", smp.samples = "per-sample"}
// CHECK-SAME: {smp.output = "rows", smp.samples = "per-sample"}
// CHECK-SAME: {smp.output = "mean", smp.samples = "'smp.reduce_mean' reduces over the batch dim, mixing the batch's samples"}
// CHECK-SAME: {smp.output = "w2", smp.samples = "it holds no samples (computed from parameters and constants only)"}
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}, %w: tensor<4x4xf32> {smp.param = "w"}) -> (tensor<6x4xf32> {smp.output = "y"}, tensor<6x4xf32> {smp.output = "rows"}, tensor<1x4xf32> {smp.output = "mean"}, tensor<4x4xf32> {smp.output = "w2"}) {
    %r = smp.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %m = smp.matmul %r, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    %s = smp.softmax %m {axis = 1 : i64} : tensor<6x4xf32>
    %c = smp.reduce_mean %m {axes = array<i64: 0>} : tensor<6x4xf32> -> tensor<1x4xf32>
    %w2 = smp.add %w, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return %s, %r, %c, %w2 : tensor<6x4xf32>, tensor<6x4xf32>, tensor<1x4xf32>, tensor<4x4xf32>
  }
}

// -----

// The samples moved off dim 0 (a transpose): not sample-major along dim 0.
// CHECK-LABEL: func.func @main
// CHECK-SAME: smp.samples = "it holds the batch's samples along dim 1, not sample-major along dim 0"
module {
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}) -> (tensor<4x2xf32> {smp.output = "t"}) {
    %t = smp.transpose %x {perm = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
    return %t : tensor<4x2xf32>
  }
}

// -----

// A contraction over the samples (x^T x).
// CHECK-LABEL: func.func @main
// CHECK-SAME: smp.samples = "'smp.matmul' contracts over the batch dim, mixing the batch's samples"
module {
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}) -> (tensor<4x4xf32> {smp.output = "g"}) {
    %g = smp.matmul %x, %x {transpose_lhs = true} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    return %g : tensor<4x4xf32>
  }
}

// -----

// Tensor parallelism's collectives over @tp keep each sample's rows: the
// sum of the ranks' parts (a row-parallel matmul's all_reduce), and
// sequence parallelism's rows scattered over the ranks (reduce_scatter,
// all_slice) and gathered back along the same dim. A scatter alone loses
// them; an all_reduce over @dp mixes the ranks' samples.
// CHECK-LABEL: func.func @main
// CHECK-SAME: {smp.output = "summed", smp.samples = "per-sample"}
// CHECK-SAME: {smp.output = "gathered", smp.samples = "per-sample"}
// CHECK-SAME: {smp.output = "sliced", smp.samples = "per-sample"}
// CHECK-SAME: {smp.output = "scattered", smp.samples = "smp cannot follow the batch's samples through 'shard.reduce_scatter'"}
// CHECK-SAME: {smp.output = "dp", smp.samples = "smp cannot follow the batch's samples through 'shard.all_reduce'"}
module {
  shard.grid @tp(shape = 2)
  shard.grid @dp(shape = 2)
  func.func @main(%x: tensor<4x6xf32> {smp.input = "x"}) -> (tensor<4x6xf32> {smp.output = "summed"}, tensor<4x6xf32> {smp.output = "gathered"}, tensor<4x6xf32> {smp.output = "sliced"}, tensor<2x6xf32> {smp.output = "scattered"}, tensor<4x6xf32> {smp.output = "dp"}) {
    %s = shard.all_reduce %x on @tp grid_axes = [0] : tensor<4x6xf32> -> tensor<4x6xf32>
    %r = shard.reduce_scatter %x on @tp grid_axes = [0] scatter_axis = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
    %e = smp.exp %r : tensor<2x6xf32>
    %g = shard.all_gather %e on @tp grid_axes = [0] gather_axis = 0 : tensor<2x6xf32> -> tensor<4x6xf32>
    %l = shard.all_slice %x on @tp grid_axes = [0] slice_axis = 0 : tensor<4x6xf32> -> tensor<2x6xf32>
    %lg = shard.all_gather %l on @tp grid_axes = [0] gather_axis = 0 : tensor<2x6xf32> -> tensor<4x6xf32>
    %d = shard.all_reduce %x on @dp grid_axes = [0] : tensor<4x6xf32> -> tensor<4x6xf32>
    return %s, %g, %lg, %r, %d : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<2x6xf32>, tensor<4x6xf32>
  }
}
