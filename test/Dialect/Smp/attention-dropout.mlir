// A dropout on the attention probabilities fuses into smp.attention (its
// `ratio` and `stream`), and every pass that places a dropout's mask places
// the attention's the same way, so that its kernels draw the mask the
// unfused smp.dropout would draw in every plan: smp-key-dropout (samples
// leading as the query's), smp-tensor-parallel (this rank's heads: dim 1
// of [B, Hq, S, Sk], in either layout), smp-build-gradients (the gradient
// draws the forward's mask again; micro-batch i's copy its samples'
// offset). A dropout whose output is also used elsewhere stays unfused.
// RUN: smp-opt %s -split-input-file -smp-raise | FileCheck %s --check-prefix=RAISE
// RUN: sed -n '1,/^\/\/ -----/p' %s | smp-opt -smp-raise | smp-opt '--smp-key-dropout=dp=2 microbatches=2' --smp-tensor-parallel=tp=2 '--smp-build-gradients=loss=mse:y:target microbatches=2' | FileCheck %s --check-prefix=PLACE

// RAISE-LABEL: func.func @main
// RAISE: smp.attention %{{.*}}, %{{.*}}, %{{.*}} {bshd = true, causal = true, ratio = 1.000000e-01 : f32, scale = 2.500000e-01 : f32, stream = 3 : i64}
// RAISE-NOT: smp.dropout
// RAISE-NOT: smp.softmax

// Micro-batch 0 and 1 of @main's forward (@main's batch of 2 is a
// micro-batch: samples 2, 4 a step on each dp rank, micro-batch 1's at
// offset 2), tp's half of the heads (dim 1 of [B, Hq, S, Sk] though q is
// bshd); the gradients draw the same masks.
// PLACE-LABEL: func.func @train_step
// PLACE: smp.attention {{.*}} {bshd = true, causal = true, ratio = 1.000000e-01 : f32, samples = 2 : i64, scale = 2.500000e-01 : f32, shard_samples = 4 : i64, smp.mb = 0 : i64, stream = 3 : i64, tp_dim = 1 : i64, tp_parts = 2 : i64} : (tensor<2x4x2x4xf32>
// PLACE: smp.attention {{.*}} {bshd = true, causal = true, ratio = 1.000000e-01 : f32, sample_offset = 2 : i64, samples = 2 : i64, scale = 2.500000e-01 : f32, shard_samples = 4 : i64, smp.mb = 1 : i64, stream = 3 : i64, tp_dim = 1 : i64, tp_parts = 2 : i64}
// PLACE: smp.attention_grad {{.*}}ratio = 1.000000e-01 : f32, samples = 2 : i64, {{.*}}smp.mb = 0 : i64, {{.*}}stream = 3 : i64, tp_dim = 1 : i64, tp_parts = 2 : i64}
// PLACE: smp.attention_grad {{.*}}ratio = 1.000000e-01 : f32, sample_offset = 2 : i64, samples = 2 : i64, {{.*}}smp.mb = 1 : i64, {{.*}}stream = 3 : i64, tp_dim = 1 : i64, tp_parts = 2 : i64}
// PLACE-NOT: smp.dropout

module {
  func.func @main(%x: tensor<2x4x16xf32> {smp.input = "x"},
                  %wq: tensor<16x16xf32> {smp.param = "wq"},
                  %wk: tensor<16x16xf32> {smp.param = "wk"},
                  %wv: tensor<16x16xf32> {smp.param = "wv"},
                  %wo: tensor<16x16xf32> {smp.param = "wo"})
      -> (tensor<2x4x16xf32> {smp.output = "y"}) {
    %ninf = smp.constant dense<0xFF800000> : tensor<f32>
    %scale = smp.constant dense<0.25> : tensor<f32>
    %causal = smp.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
    %q = smp.matmul %x, %wq : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
    %k = smp.matmul %x, %wk : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
    %v = smp.matmul %x, %wv : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
    %qh = smp.reshape %q : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
    %kh = smp.reshape %k : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
    %vh = smp.reshape %v : tensor<2x4x16xf32> -> tensor<2x4x4x4xf32>
    %qt = smp.transpose %qh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
    %kt = smp.transpose %kh {perm = array<i64: 0, 2, 3, 1>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
    %vt = smp.transpose %vh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
    %s = smp.matmul %qt, %kt : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
    %ss = smp.mul %s, %scale : (tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
    %sm = smp.where %causal, %ss, %ninf : (tensor<4x4xi1>, tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
    %p = smp.softmax %sm {axis = 3 : i64} : tensor<2x4x4x4xf32>
    %pd = smp.dropout %p {ratio = 0.1 : f32, stream = 3 : i64} : tensor<2x4x4x4xf32>
    %o = smp.matmul %pd, %vt : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
    %ot = smp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
    %oh = smp.reshape %ot : tensor<2x4x4x4xf32> -> tensor<2x4x16xf32>
    %y = smp.matmul %oh, %wo : (tensor<2x4x16xf32>, tensor<16x16xf32>) -> tensor<2x4x16xf32>
    return %y : tensor<2x4x16xf32>
  }
}

// -----

// The dropped probabilities are also returned: the chain stays unfused.
// RAISE-LABEL: func.func @reused
// RAISE-NOT: smp.attention
// RAISE: smp.dropout
func.func @reused(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                  %v: tensor<2x4x8x16xf32>)
    -> (tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>) {
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %s {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %pd = smp.dropout %p {ratio = 0.1 : f32, stream = 0 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %pd, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o, %pd : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>
}
