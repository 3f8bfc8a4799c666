// The fused QKV projection as Hugging Face's GPT-2 exports it (Conv1D: a
// [tokens, H] x [H, 3H] product and bias, viewed as [B, S, 3H], then split
// into Q, K and V): at tp=2 the walk sees through the reshape in 3 blocks
// (ReshapeTpRule: a dimension of the same size), so the weight, the bias,
// the product and its view are split in 3 blocks, each rank attends 1 of
// the 2 heads, and c_proj is row-parallel. Before, the walk stopped at the
// reshape and the whole attention stayed replicated.
// RUN: smp-opt %s --smp-tensor-parallel=tp=2 | FileCheck %s

// CHECK: func.func @main(
// CHECK-SAME: tensor<8x12xf32> {smp.layout = #smp.layout<tp = split(dim = 1, blocks = 3)>, smp.param = "c_attn.weight"}
// CHECK-SAME: tensor<12xf32> {smp.layout = #smp.layout<tp = split(dim = 0, blocks = 3)>, smp.param = "c_attn.bias"}
// CHECK-SAME: tensor<4x8xf32> {smp.layout = #smp.layout<tp = split(dim = 0)>, smp.param = "c_proj.weight"}
// CHECK: %[[X:.*]] = smp.tp_copy %arg0 : tensor<8x8xf32>
// CHECK: smp.matmul %[[X]], %arg1 : (tensor<8x8xf32>, tensor<8x12xf32>) -> tensor<8x12xf32>
// CHECK: smp.reshape {{.*}} : tensor<8x12xf32> -> tensor<2x4x12xf32>
// CHECK: smp.split {{.*}} sizes = array<i64: 4, 4, 4>{{.*}} : tensor<2x4x12xf32> -> tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
// CHECK: smp.attention {{.*}} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>) -> (tensor<2x1x4x4xf32>, tensor<2x1x4x2xf32>)
// CHECK: smp.matmul {{.*}}, %arg3 : (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK: shard.all_reduce {{.*}} on @tp grid_axes = [0] : tensor<8x8xf32> -> tensor<8x8xf32>

module {
  func.func @main(%x: tensor<8x8xf32> {smp.input = "x"},
                  %w: tensor<8x24xf32> {smp.param = "c_attn.weight"},
                  %b: tensor<24xf32> {smp.param = "c_attn.bias"},
                  %wo: tensor<8x8xf32> {smp.param = "c_proj.weight"})
      -> (tensor<8x8xf32> {smp.output = "y"}) {
    %qkv = smp.matmul %x, %w : (tensor<8x8xf32>, tensor<8x24xf32>) -> tensor<8x24xf32>
    %qkvb = smp.add %qkv, %b : (tensor<8x24xf32>, tensor<24xf32>) -> tensor<8x24xf32>
    %v3 = smp.reshape %qkvb : tensor<8x24xf32> -> tensor<2x4x24xf32>
    %q, %k, %v = smp.split %v3 {axis = 2 : i64, sizes = array<i64: 8, 8, 8>} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %qh = smp.reshape %q : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %kh = smp.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %vh = smp.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %qt = smp.transpose %qh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %kt = smp.transpose %kh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %vt = smp.transpose %vh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %o, %l = smp.attention %qt, %kt, %vt {causal = true, scale = 0.5 : f32} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32>)
    %ot = smp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %oh = smp.reshape %ot : tensor<2x4x2x4xf32> -> tensor<8x8xf32>
    %y = smp.matmul %oh, %wo : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    return %y : tensor<8x8xf32>
  }
}
