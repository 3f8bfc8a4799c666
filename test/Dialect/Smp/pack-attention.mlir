// smp-pack-attention (lib/Dialect/Smp/Transforms/PackAttention.cpp): a fused
// QKV projection split into q, k and v heads for smp.attention is read in
// place (smp.packed_attention on its [B, S, Hq + 2 Hkv, D] view) and the
// backward's concatenated dq, dk, dv are written packed; anything else
// reading the pieces leaves the graph as it was.
// RUN: smp-opt %s --split-input-file --smp-pack-attention | FileCheck %s

// Forward and backward (grouped-query: 4 query heads over 2 key/value
// heads, D 8), annotations and the dropout key on the probabilities kept.
// CHECK-LABEL: func.func @step
// CHECK-NOT: smp.split
// CHECK: %[[QKV:.*]] = smp.reshape %arg0 {smp.stage = 1 : i64} : tensor<2x3x64xf32> -> tensor<2x3x8x8xf32>
// CHECK: %[[O:.*]], %[[L:.*]] = smp.packed_attention %[[QKV]] {causal = true, kv_heads = 2 : i64, ratio = 1.000000e-01 : f32, sample_offset = 2 : i64, samples = 2 : i64, scale = 5.000000e-01 : f32, shard_samples = 4 : i64, smp.stage = 1 : i64, stream = 5 : i64, tp_dim = 1 : i64, tp_parts = 2 : i64} : (tensor<2x3x8x8xf32>) -> (tensor<2x3x4x8xf32>, tensor<2x4x3x2xf32>)
// CHECK: %[[G:.*]] = smp.packed_attention_grad %[[QKV]], %[[O]], %[[L]], %arg1 {causal = true, kv_heads = 2 : i64, ratio = 1.000000e-01 : f32, sample_offset = 2 : i64, samples = 2 : i64, scale = 5.000000e-01 : f32, shard_samples = 4 : i64, smp.bwd, stream = 5 : i64, tp_dim = 1 : i64, tp_parts = 2 : i64} : (tensor<2x3x8x8xf32>, tensor<2x3x4x8xf32>, tensor<2x4x3x2xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x8x8xf32>
// CHECK-NOT: smp.concat
// CHECK: %[[DX:.*]] = smp.reshape %[[G]] {smp.bwd} : tensor<2x3x8x8xf32> -> tensor<2x3x64xf32>
// CHECK: return %[[O]], %[[DX]]
func.func @step(%x: tensor<2x3x64xf32>, %dy: tensor<2x3x4x8xf32>)
    -> (tensor<2x3x4x8xf32>, tensor<2x3x64xf32>) {
  %s:3 = smp.split %x {axis = 2 : i64, sizes = array<i64: 32, 16, 16>, smp.stage = 1 : i64} : tensor<2x3x64xf32> -> tensor<2x3x32xf32>, tensor<2x3x16xf32>, tensor<2x3x16xf32>
  %q = smp.reshape %s#0 : tensor<2x3x32xf32> -> tensor<2x3x4x8xf32>
  %k = smp.reshape %s#1 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %v = smp.reshape %s#2 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %o, %l = smp.attention %q, %k, %v {bshd = true, causal = true, scale = 0.5 : f32, smp.stage = 1 : i64, ratio = 0.1 : f32, stream = 5 : i64, samples = 2 : i64, sample_offset = 2 : i64, shard_samples = 4 : i64, tp_dim = 1 : i64, tp_parts = 2 : i64} : (tensor<2x3x4x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>) -> (tensor<2x3x4x8xf32>, tensor<2x4x3x2xf32>)
  %dq, %dk, %dv = smp.attention_grad %q, %k, %v, %o, %l, %dy {bshd = true, causal = true, scale = 0.5 : f32, smp.bwd, ratio = 0.1 : f32, stream = 5 : i64, samples = 2 : i64, sample_offset = 2 : i64, shard_samples = 4 : i64, tp_dim = 1 : i64, tp_parts = 2 : i64} : (tensor<2x3x4x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x4x8xf32>, tensor<2x4x3x2xf32>, tensor<2x3x4x8xf32>) -> (tensor<2x3x4x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>)
  %gq = smp.reshape %dq : tensor<2x3x4x8xf32> -> tensor<2x3x32xf32>
  %gk = smp.reshape %dk : tensor<2x3x2x8xf32> -> tensor<2x3x16xf32>
  %gv = smp.reshape %dv : tensor<2x3x2x8xf32> -> tensor<2x3x16xf32>
  %dx = smp.concat %gq, %gk, %gv {axis = 2 : i64, smp.bwd} : (tensor<2x3x32xf32>, tensor<2x3x16xf32>, tensor<2x3x16xf32>) -> tensor<2x3x64xf32>
  return %o, %dx : tensor<2x3x4x8xf32>, tensor<2x3x64xf32>
}

// -----

// A forward alone (inference), with a mask: packed, the mask kept.
// CHECK-LABEL: func.func @forward
// CHECK: %[[QKV:.*]] = smp.reshape %arg0 : tensor<2x3x48xf32> -> tensor<2x3x6x8xf32>
// CHECK: smp.packed_attention %[[QKV]], %arg1 {kv_heads = 2 : i64, scale = 1.000000e+00 : f32} : (tensor<2x3x6x8xf32>, tensor<2x1x3x3xi1>)
func.func @forward(%x: tensor<2x3x48xf32>, %m: tensor<2x1x3x3xi1>) -> tensor<2x3x2x8xf32> {
  %s:3 = smp.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<2x3x48xf32> -> tensor<2x3x16xf32>, tensor<2x3x16xf32>, tensor<2x3x16xf32>
  %q = smp.reshape %s#0 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %k = smp.reshape %s#1 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %v = smp.reshape %s#2 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %o, %l = smp.attention %q, %k, %v, %m {bshd = true, scale = 1.0 : f32} : (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x1x3x3xi1>) -> (tensor<2x3x2x8xf32>, tensor<2x2x3x2xf32>)
  return %o : tensor<2x3x2x8xf32>
}

// -----

// Not packed: k is read by something else too (the split stays).
// CHECK-LABEL: func.func @other_reader
// CHECK: smp.split
// CHECK: smp.attention
// CHECK-NOT: packed
func.func @other_reader(%x: tensor<2x3x48xf32>) -> (tensor<2x3x2x8xf32>, tensor<2x3x16xf32>) {
  %s:3 = smp.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<2x3x48xf32> -> tensor<2x3x16xf32>, tensor<2x3x16xf32>, tensor<2x3x16xf32>
  %q = smp.reshape %s#0 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %k = smp.reshape %s#1 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %v = smp.reshape %s#2 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %o, %l = smp.attention %q, %k, %v {bshd = true, scale = 1.0 : f32} : (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>) -> (tensor<2x3x2x8xf32>, tensor<2x2x3x2xf32>)
  return %o, %s#1 : tensor<2x3x2x8xf32>, tensor<2x3x16xf32>
}

// -----

// Not packed: the pieces are v, k, q (the query is not the first).
// CHECK-LABEL: func.func @other_order
// CHECK: smp.split
// CHECK-NOT: packed
func.func @other_order(%x: tensor<2x3x48xf32>) -> tensor<2x3x2x8xf32> {
  %s:3 = smp.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<2x3x48xf32> -> tensor<2x3x16xf32>, tensor<2x3x16xf32>, tensor<2x3x16xf32>
  %v = smp.reshape %s#0 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %k = smp.reshape %s#1 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %q = smp.reshape %s#2 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %o, %l = smp.attention %q, %k, %v {bshd = true, scale = 1.0 : f32} : (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>) -> (tensor<2x3x2x8xf32>, tensor<2x2x3x2xf32>)
  return %o : tensor<2x3x2x8xf32>
}

// -----

// Not packed: the heads-first layout (q, k, v transposed, not views).
// CHECK-LABEL: func.func @heads_first
// CHECK: smp.split
// CHECK-NOT: packed
func.func @heads_first(%x: tensor<2x2x48xf32>) -> tensor<2x2x2x8xf32> {
  %s:3 = smp.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<2x2x48xf32> -> tensor<2x2x16xf32>, tensor<2x2x16xf32>, tensor<2x2x16xf32>
  %q = smp.reshape %s#0 : tensor<2x2x16xf32> -> tensor<2x2x2x8xf32>
  %k = smp.reshape %s#1 : tensor<2x2x16xf32> -> tensor<2x2x2x8xf32>
  %v = smp.reshape %s#2 : tensor<2x2x16xf32> -> tensor<2x2x2x8xf32>
  %o, %l = smp.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x2x2x8xf32>, tensor<2x2x2x8xf32>, tensor<2x2x2x8xf32>) -> (tensor<2x2x2x8xf32>, tensor<2x2x2x2xf32>)
  return %o : tensor<2x2x2x8xf32>
}

// -----

// Not packed: v's head dim differs from q's and k's.
// CHECK-LABEL: func.func @value_dim
// CHECK: smp.split
// CHECK-NOT: packed
func.func @value_dim(%x: tensor<2x3x64xf32>) -> tensor<2x3x2x16xf32> {
  %s:3 = smp.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 32>} : tensor<2x3x64xf32> -> tensor<2x3x16xf32>, tensor<2x3x16xf32>, tensor<2x3x32xf32>
  %q = smp.reshape %s#0 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %k = smp.reshape %s#1 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %v = smp.reshape %s#2 : tensor<2x3x32xf32> -> tensor<2x3x2x16xf32>
  %o, %l = smp.attention %q, %k, %v {bshd = true, scale = 1.0 : f32} : (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x16xf32>) -> (tensor<2x3x2x16xf32>, tensor<2x2x3x2xf32>)
  return %o : tensor<2x3x2x16xf32>
}

// -----

// Not packed: a trainable mask's gradient reads q, k and v too.
// CHECK-LABEL: func.func @mask_grad
// CHECK: smp.split
// CHECK-NOT: packed
func.func @mask_grad(%x: tensor<2x3x48xf32>, %m: tensor<1x2x3x3xf32>, %dy: tensor<2x3x2x8xf32>) -> (tensor<2x3x2x8xf32>, tensor<1x2x3x3xf32>) {
  %s:3 = smp.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<2x3x48xf32> -> tensor<2x3x16xf32>, tensor<2x3x16xf32>, tensor<2x3x16xf32>
  %q = smp.reshape %s#0 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %k = smp.reshape %s#1 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %v = smp.reshape %s#2 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %o, %l = smp.attention %q, %k, %v, %m {bshd = true, scale = 1.0 : f32} : (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<1x2x3x3xf32>) -> (tensor<2x3x2x8xf32>, tensor<2x2x3x2xf32>)
  %dm = smp.attention_mask_grad %q, %k, %v, %o, %l, %dy, %m {bshd = true, scale = 1.0 : f32} : (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x2x3x2xf32>, tensor<2x3x2x8xf32>, tensor<1x2x3x3xf32>) -> tensor<1x2x3x3xf32>
  return %o, %dm : tensor<2x3x2x8xf32>, tensor<1x2x3x3xf32>
}

// -----

// Not packed: the backward's gradients are not concatenated in q, k, v
// order (so nothing is: the forward's split is what the backward reads).
// CHECK-LABEL: func.func @grad_order
// CHECK: smp.split
// CHECK: smp.concat
// CHECK-NOT: packed
func.func @grad_order(%x: tensor<2x3x48xf32>, %dy: tensor<2x3x2x8xf32>) -> tensor<2x3x48xf32> {
  %s:3 = smp.split %x {axis = 2 : i64, sizes = array<i64: 16, 16, 16>} : tensor<2x3x48xf32> -> tensor<2x3x16xf32>, tensor<2x3x16xf32>, tensor<2x3x16xf32>
  %q = smp.reshape %s#0 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %k = smp.reshape %s#1 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %v = smp.reshape %s#2 : tensor<2x3x16xf32> -> tensor<2x3x2x8xf32>
  %o, %l = smp.attention %q, %k, %v {bshd = true, scale = 1.0 : f32} : (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>) -> (tensor<2x3x2x8xf32>, tensor<2x2x3x2xf32>)
  %dq, %dk, %dv = smp.attention_grad %q, %k, %v, %o, %l, %dy {bshd = true, scale = 1.0 : f32} : (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x2x3x2xf32>, tensor<2x3x2x8xf32>) -> (tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>, tensor<2x3x2x8xf32>)
  %gq = smp.reshape %dq : tensor<2x3x2x8xf32> -> tensor<2x3x16xf32>
  %gk = smp.reshape %dk : tensor<2x3x2x8xf32> -> tensor<2x3x16xf32>
  %gv = smp.reshape %dv : tensor<2x3x2x8xf32> -> tensor<2x3x16xf32>
  %dx = smp.concat %gk, %gq, %gv {axis = 2 : i64} : (tensor<2x3x16xf32>, tensor<2x3x16xf32>, tensor<2x3x16xf32>) -> tensor<2x3x48xf32>
  return %dx : tensor<2x3x48xf32>
}
