// smp.attention's sharding rule (lib/Dialect/Smp/OpModels/Attention.cpp):
// split by heads. Grouped-query attention (4 query heads over 2 key/value
// heads) with a causal mask broadcast over the heads: at tp=2 each rank
// attends 2 query heads with their 1 key/value head and reads the mask
// whole; the log-sum-exp is split with the output. At tp=4 the 2 key/value
// heads are fewer than the ranks: k and v are computed whole on every rank
// (wk, wv not split) and enter through smp.tp_copy (each rank's k/v
// gradient, from its own query head, is summed), and each rank gathers the
// one key/value head of its query head (rank * 2 / 4: [0, 0, 1, 1]). At
// tp=8 the 4 query heads do not divide: an error naming the op.
// RUN: smp-opt %s --smp-tensor-parallel=tp=2 | FileCheck %s
// RUN: smp-opt %s --smp-tensor-parallel=tp=4 | FileCheck %s --check-prefix=KV
// RUN: smp-opt %s --smp-tensor-parallel=tp=4 '--smp-build-train-step=loss=mse:y:target' | FileCheck %s --check-prefix=KVGRAD
// RUN: not smp-opt %s --smp-tensor-parallel=tp=8 2>&1 | FileCheck %s --check-prefix=ERR
// RUN: smp-opt %s --smp-tensor-parallel=tp=2 '--smp-build-train-step=loss=mse:y:target' | FileCheck %s --check-prefix=GRAD
// The same after smp-attention-layout ([B, S, H, D] heads, split along dim
// 2; the log-sum-exp [B, H, S] still along dim 1).
// RUN: smp-opt %s --smp-attention-layout --smp-tensor-parallel=tp=2 '--smp-build-train-step=loss=mse:y:target' | FileCheck %s --check-prefix=BSHD
// BSHD: smp.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]*}} {bshd = true, scale = 2.500000e-01 : f32} : (tensor<2x4x2x4xf32>, tensor<2x4x1x4xf32>, tensor<2x4x1x4xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x4x2x4xf32>, tensor<2x2x4x2xf32>)
// BSHD: smp.attention_grad {{.*}} {bshd = true, {{.*}} -> (tensor<2x4x2x4xf32>, tensor<2x4x1x4xf32>, tensor<2x4x1x4xf32>)

// CHECK: func.func @main(
// CHECK-SAME: tensor<16x8xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "wq"}
// CHECK-SAME: tensor<16x4xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "wk"}
// CHECK-SAME: tensor<16x4xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "wv"}
// CHECK-SAME: tensor<8x16xf32> {smp.layout = #smp.layout<tp = split(dim = 0)>, smp.param = "wo"}
// CHECK-SAME: %[[M:[^:]*]]: tensor<1x1x4x4xi1> {smp.input = "mask"}
// CHECK: smp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {scale = 2.500000e-01 : f32} : (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x2xf32>)

// KV: func.func @main(
// KV-SAME: tensor<16x4xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "wq"}
// KV-SAME: tensor<16x8xf32> {smp.param = "wk"}, %{{[^:]*}}: tensor<16x8xf32> {smp.param = "wv"}
// KV: %[[K:.*]] = smp.tp_copy %{{.*}} : tensor<2x2x4x4xf32>
// KV: %[[V:.*]] = smp.tp_copy %{{.*}} : tensor<2x2x4x4xf32>
// KV: %[[T:.*]] = smp.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// KV: %[[R:.*]] = smp.tp_rank
// KV: %[[R1:.*]] = smp.reshape %[[R]]
// KV: %[[H:.*]] = smp.gather %[[T]], %[[R1]] {axis = 0 : i64}
// KV: %[[KH:.*]] = smp.gather %[[K]], %[[H]] {axis = 1 : i64} : (tensor<2x2x4x4xf32>, tensor<1xi64>) -> tensor<2x1x4x4xf32>
// KV: %[[VH:.*]] = smp.gather %[[V]], %[[H]] {axis = 1 : i64}
// KV: smp.attention %{{.*}}, %[[KH]], %[[VH]], %{{.*}} {scale = 2.500000e-01 : f32} : (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x1x4x4xf32>, tensor<2x1x4x2xf32>)
// KV-NOT: smp.tp_whole_kv

// KVGRAD-LABEL: func.func @train_step
// KVGRAD: smp.attention_grad {{.*}} -> (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>)
// KVGRAD: smp.gather_grad %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<1xi64>, tensor<2x1x4x4xf32>) -> tensor<2x2x4x4xf32>

// ERR: error: loc("out"): cannot split the layer ending at 'out' over tp 8: 'smp.transpose' has 4 along the dimension tp splits (heads or hidden units), which tp 8 does not divide

// GRAD-LABEL: func.func @train_step
// GRAD: smp.attention_grad {{.*}} -> (tensor<2x2x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>)

module {
  func.func @main(%x: tensor<2x4x16xf32> {smp.input = "x"},
                  %wq: tensor<16x16xf32> {smp.param = "wq"},
                  %wk: tensor<16x8xf32> {smp.param = "wk"},
                  %wv: tensor<16x8xf32> {smp.param = "wv"},
                  %wo: tensor<16x16xf32> {smp.param = "wo"},
                  %mask: tensor<1x1x4x4xi1> {smp.input = "mask"})
      -> (tensor<2x4x16xf32> {smp.output = "y"}) {
    %q = smp.matmul %x, %wq : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32> loc("q")
    %k = smp.matmul %x, %wk : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32> loc("k")
    %v = smp.matmul %x, %wv : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32> loc("v")
    %qh = smp.reshape %q : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
    %kh = smp.reshape %k : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32> loc("kh")
    %vh = smp.reshape %v : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %qt = smp.transpose %qh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
    %kt = smp.transpose %kh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %vt = smp.transpose %vh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %o, %l = smp.attention %qt, %kt, %vt, %mask {scale = 0.25 : f32} : (tensor<2x4x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<1x1x4x4xi1>) -> (tensor<2x4x4x4xf32>, tensor<2x4x4x2xf32>)
    %ot = smp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
    %oh = smp.reshape %ot : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
    %y = smp.matmul %oh, %wo : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32> loc("out")
    return %y : tensor<2x4x16xf32>
  }
}
