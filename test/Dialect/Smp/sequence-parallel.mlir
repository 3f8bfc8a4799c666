// RUN: smp-opt %s -split-input-file -verify-diagnostics --smp-tensor-parallel=tp=2 --smp-sequence-parallel | FileCheck %s
// RUN: not smp-opt %s -split-input-file -pass-pipeline='builtin.module(smp-train-pipeline{loss=y tp=2 sequence-parallel=true})' 2>/dev/null | FileCheck %s --check-prefix=STEP
// RUN: not smp-opt %s -split-input-file --smp-sequence-parallel 2>&1 | FileCheck %s --check-prefix=NOTP

// An MLP block between two layer norms, tp 2: the micro-batch's 2 x 4 = 8
// tokens are viewed as [8, 8] and each rank keeps 4 rows between the
// regions. The region's exit becomes a reduce_scatter; the bias add, the
// residual add (its replicated operand sliced to the rank's rows) and the
// second norm (axis 1 of the rows; its scale and bias, like the MLP's
// bias, through tp_copy: their gradients are summed over the ranks) run on
// rows; the loss's reduce_sum reads the whole value, all-gathered. The
// first norm reads the embedding sum, which no region made: it stays whole,
// as does the region's tp_copy entry.
// CHECK-LABEL: func.func @main
// CHECK: %[[E:.*]] = smp.add %arg0, %arg6 : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: smp.layer_norm %[[E]], %arg1, %arg2 {axis = 2 : i64
// CHECK: %[[P:.*]] = smp.matmul {{.*}}, %arg4 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[PF:.*]] = smp.reshape %[[P]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[RS:.*]] = shard.reduce_scatter %[[PF]] on @tp grid_axes = [0] scatter_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK: %[[B:.*]] = smp.tp_copy %arg5 : tensor<8xf32>
// CHECK: %[[OB:.*]] = smp.add %[[RS]], %[[B]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: %[[EF:.*]] = smp.reshape %[[E]] : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[ER:.*]] = shard.all_slice %[[EF]] on @tp grid_axes = [0] slice_axis = 0 : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK: %[[R:.*]] = smp.add %[[OB]], %[[ER]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[G:.*]] = smp.tp_copy %arg1 : tensor<8xf32>
// CHECK: %[[GB:.*]] = smp.tp_copy %arg2 : tensor<8xf32>
// CHECK: %[[N:.*]] = smp.layer_norm %[[R]], %[[G]], %[[GB]] {axis = 1 : i64{{.*}} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: %[[ALL:.*]] = shard.all_gather %[[N]] on @tp grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>
// CHECK: %[[W:.*]] = smp.reshape %[[ALL]] : tensor<8x8xf32> -> tensor<2x4x8xf32>
// CHECK: smp.reduce_sum %[[W]]
// CHECK-NOT: shard.all_reduce

// The step: the gradients of the reduce_scatter, all_slice and all_gather
// are all_gather, all_gather (folded away against the loss gradient's
// all_slice) and all_slice; the norm's scale and bias gradients on rows are
// all-reduced over tp.
// STEP-LABEL: func.func @train_step
// STEP: smp.layer_norm_grad {{.*}} : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>)
// STEP: shard.all_reduce %scale_grad on @tp
// STEP: shard.all_reduce %bias_grad on @tp
// STEP: shard.all_gather %input_grad on @tp grid_axes = [0] gather_axis = 0 : tensor<4x8xf32> -> tensor<8x8xf32>

// NOTP: error: smp-sequence-parallel needs tensor parallelism (a shard.grid @tp of more than one rank: run smp-tensor-parallel{tp=N} first)
module {
  func.func @main(%x: tensor<2x4x8xf32> {smp.input = "x"},
                  %g: tensor<8xf32> {smp.param = "ln.weight"},
                  %bb: tensor<8xf32> {smp.param = "ln.bias"},
                  %w1: tensor<8x16xf32> {smp.param = "fc1"},
                  %w2: tensor<16x8xf32> {smp.param = "fc2"},
                  %b2: tensor<8xf32> {smp.param = "fc2.bias"},
                  %pos: tensor<4x8xf32> {smp.param = "pos"})
      -> (tensor<f32> {smp.output = "y"}) {
    %e = smp.add %x, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %n = smp.layer_norm %e, %g, %bb {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %h = smp.matmul %n, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %a = smp.gelu %h : tensor<2x4x16xf32>
    %o = smp.matmul %a, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %ob = smp.add %o, %b2 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %r = smp.add %ob, %e : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %n2 = smp.layer_norm %r, %g, %bb {axis = -1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %s = smp.reduce_sum %n2 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// 3 tokens cannot be split over tp 2: refused, naming the fix.
module {
  func.func @main(%x: tensor<3x8xf32> {smp.input = "x"},
                  %w1: tensor<8x16xf32> {smp.param = "fc1"},
                  %w2: tensor<16x8xf32> {smp.param = "fc2"})
      -> (tensor<f32> {smp.output = "y"}) {
    %h = smp.matmul %x, %w1 : (tensor<3x8xf32>, tensor<8x16xf32>) -> tensor<3x16xf32>
    %a = smp.relu %h : tensor<3x16xf32>
    // expected-error @+1 {{sequence parallelism splits the 3 tokens of a micro-batch (the leading dims of 'tensor<3x8xf32>') over tp 2, which does not divide them; give a micro-batch whose tokens tp divides, or leave out --sequence-parallel}}
    %o = smp.matmul %a, %w2 : (tensor<3x16xf32>, tensor<16x8xf32>) -> tensor<3x8xf32>
    %r = smp.add %o, %x : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<3x8xf32>
    %s = smp.reduce_sum %r {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A region whose output nothing reads token by token (the reduction reads
// it whole): nothing to split along the sequence, refused.
module {
  // expected-error @+1 {{smp-sequence-parallel: found no tensor-parallel region whose output is read token by token (a norm, a residual add) to split along the sequence}}
  func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                  %w1: tensor<8x16xf32> {smp.param = "fc1"},
                  %w2: tensor<16x8xf32> {smp.param = "fc2"})
      -> (tensor<f32> {smp.output = "y"}) {
    %h = smp.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
    %a = smp.relu %h : tensor<4x16xf32>
    %o = smp.matmul %a, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
    %s = smp.reduce_sum %o {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}
