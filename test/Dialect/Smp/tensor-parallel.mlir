// RUN: smp-opt %s --smp-tensor-parallel=tp=2 | FileCheck %s
// RUN: not smp-opt %s --smp-tensor-parallel=tp=4 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: smp-opt %s --smp-tensor-parallel=tp=2 '--smp-build-train-step=loss=mse:y:target' | FileCheck %s --check-prefix=GRAD

// Attention (Q, K, V column-parallel by heads, output row-parallel) and an
// MLP (column then row): each rank keeps 1 of the 2 heads and 8 of the 16
// hidden units; weights get their local types and a tp split layout.
// CHECK: shard.grid @tp(shape = 2)
// CHECK: func.func @main(%[[X:.*]]: tensor<2x4x8xf32> {smp.input = "x"},
// CHECK-SAME: tensor<8x4xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "wq"}
// CHECK-SAME: tensor<4x8xf32> {smp.layout = #smp.layout<tp = split(dim = 0)>, smp.param = "wo"}
// CHECK-SAME: tensor<8x8xf32> {smp.layout = #smp.layout<tp = split(dim = 0)>, smp.param = "w1"}
// CHECK-SAME: tensor<8xf32> {smp.layout = #smp.layout<tp = split(dim = 0)>, smp.param = "b1"}
// CHECK-SAME: tensor<8x8xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "w2"}
// CHECK: %[[XC:.*]] = smp.tp_copy %[[X]] : tensor<2x4x8xf32>
// CHECK: smp.matmul %[[XC]], %{{.*}} : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
// CHECK: smp.reshape %{{.*}} : tensor<2x4x4xf32> -> tensor<2x4x1x4xf32>
// CHECK: smp.softmax %{{.*}} {axis = 3 : i64} : tensor<2x1x4x4xf32>
// CHECK: %[[PART:.*]] = smp.matmul %{{.*}}, %{{.*}} : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[PART]] on @tp grid_axes = [0]
// CHECK: %[[H:.*]] = smp.add %[[X]], %[[SUM]]
// CHECK: %[[HC:.*]] = smp.tp_copy %[[H]]
// CHECK: smp.matmul %[[HC]], %{{.*}} {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: smp.gelu %{{.*}} : tensor<2x4x8xf32>
// CHECK: shard.all_reduce
// CHECK-NOT: shard.all_reduce
// CHECK: return

// HEADS: cannot split the layer ending at 'attn_out' over tp 4: 'smp.transpose' has 2 along the dimension tp splits (heads or hidden units), which tp 4 does not divide

// The backward: tp_copy's gradient is all-reduced over @tp, the forward
// all_reduce's passes unchanged, and the squares of the sliced parameters'
// gradients are summed over @tp for the norm.
// GRAD-LABEL: func.func @train_step
// GRAD-COUNT-2: shard.all_reduce {{.*}} on @tp grid_axes = [0] : tensor<2x4x8xf32>
// GRAD: smp.sub
// The gradient of h (the MLP's input; x is an input and needs none).
// GRAD: shard.all_reduce {{.*}} on @tp grid_axes = [0] : tensor<2x4x8xf32>
// GRAD-NOT: shard.all_reduce {{.*}} : tensor<2x4x8xf32>
// GRAD: %[[SQ:.*]] = shard.all_reduce {{.*}} on @tp grid_axes = [0] : tensor<f32>
// GRAD-NEXT: smp.sqrt %[[SQ]]
// GRAD-NOT: shard.all_reduce
// GRAD: return

module {
  func.func @main(%x: tensor<2x4x8xf32> {smp.input = "x"},
                  %wq: tensor<8x8xf32> {smp.param = "wq"},
                  %wk: tensor<8x8xf32> {smp.param = "wk"},
                  %wv: tensor<8x8xf32> {smp.param = "wv"},
                  %wo: tensor<8x8xf32> {smp.param = "wo"},
                  %w1: tensor<16x8xf32> {smp.param = "w1"},
                  %b1: tensor<16xf32> {smp.param = "b1"},
                  %w2: tensor<8x16xf32> {smp.param = "w2"}) -> (tensor<2x4x8xf32> {smp.output = "y"}) {
    %q = smp.matmul %x, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("q")
    %k = smp.matmul %x, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("k")
    %v = smp.matmul %x, %wv : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("v")
    %qh = smp.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %kh = smp.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %vh = smp.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %qt = smp.transpose %qh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %kt = smp.transpose %kh {perm = array<i64: 0, 2, 3, 1>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %vt = smp.transpose %vh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %s = smp.matmul %qt, %kt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %p = smp.softmax %s {axis = 3 : i64} : tensor<2x2x4x4xf32>
    %o = smp.matmul %p, %vt : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %ot = smp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %om = smp.reshape %ot : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    %a = smp.matmul %om, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("attn_out")
    %h = smp.add %x, %a : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %f = smp.matmul %h, %w1 {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32> loc("fc1")
    %fb = smp.add %f, %b1 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
    %g = smp.gelu %fb : tensor<2x4x16xf32>
    %m = smp.matmul %g, %w2 {transpose_rhs = true} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32> loc("fc2")
    %y = smp.add %h, %m : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}
