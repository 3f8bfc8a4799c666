// The verifier of smp.attention, smp.attention_grad, smp.attention_mask_grad
// and the packed ops smp.packed_attention, smp.packed_attention_grad
// (SmpAttentionOps.cpp).
// RUN: smp-opt %s -split-input-file -verify-diagnostics

func.func @rank(%q: tensor<4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error @+2 {{'smp.attention' query must be rank 4 [batch, heads, seq, head_dim], got 'tensor<4x8x16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>)
  return
}

// -----

func.func @heads(%q: tensor<2x6x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) {
  // expected-error @+2 {{'smp.attention' query heads 6 are not a multiple of the key/value heads 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x6x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x6x8x16xf32>, tensor<2x6x8x2xf32>)
  return
}

// -----

func.func @head_dim(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x32xf32>, %v: tensor<2x4x8x32xf32>) {
  // expected-error @+2 {{'smp.attention' key 'tensor<2x4x8x32xf32>' must have the query's head dim 16}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x32xf32>, tensor<2x4x8x32xf32>) -> (tensor<2x4x8x32xf32>, tensor<2x4x8x2xf32>)
  return
}

// -----

func.func @key_value(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x9x16xf32>) {
  // expected-error @+2 {{'smp.attention' key 'tensor<2x4x8x16xf32>' and value 'tensor<2x4x9x16xf32>' must have the same heads and length}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x9x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>)
  return
}

// -----

func.func @batch(%q: tensor<2x4x8x16xf32>, %k: tensor<1x4x8x16xf32>, %v: tensor<1x4x8x16xf32>) {
  // expected-error @+2 {{'smp.attention' batch sizes differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>)
  return
}

// -----

func.func @element_type(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xbf16>, %v: tensor<2x4x8x16xf32>) {
  // expected-error @+2 {{'smp.attention' query, key and value must share one element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>)
  return
}

// -----

func.func @mask_shape(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<2x2x8x8xi1>) {
  // expected-error @+2 {{'smp.attention' mask 'tensor<2x2x8x8xi1>' must be rank 4 with each dim 1 or that of [batch, heads, seq, key seq] = [2, 4, 8, 8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v, %m {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x2x8x8xi1>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>)
  return
}

// -----

func.func @mask_type(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %m: tensor<1x1x8x8xi64>) {
  // expected-error @+2 {{'smp.attention' mask must be i1 or the query's element type, got 'tensor<1x1x8x8xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v, %m {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<1x1x8x8xi64>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>)
  return
}

// -----

func.func @grad_lse(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %o: tensor<2x4x8x16xf32>, %l: tensor<2x4x8x2xbf16>, %g: tensor<2x4x8x16xf32>) {
  // expected-error @+2 {{'smp.attention_grad' lse 'tensor<2x4x8x2xbf16>' must be 'tensor<2x4x8x2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq, %dk, %dv = smp.attention_grad %q, %k, %v, %o, %l, %g {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x2xbf16>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
  return
}

// -----

// expected-error @+1 {{'smp.causal_values' belongs on a frozen argument whose last two dims are equal (a [..., S, S] mask)}}
func.func @causal_values_trainable(%m: tensor<8x8xf32> {smp.param = "m", smp.causal_values = array<f64: 0.0, 1.0>}) {
  return
}

// -----

// expected-error @+1 {{'smp.causal_values' belongs on a frozen argument whose last two dims are equal (a [..., S, S] mask)}}
func.func @causal_values_not_square(%m: tensor<8x4xf32> {smp.frozen, smp.param = "m", smp.causal_values = array<f64: 0.0, 1.0>}) {
  return
}

// -----

// expected-error @+1 {{'smp.causal_values' must be array<f64: below, above>}}
func.func @causal_values_three(%m: tensor<8x8xf32> {smp.frozen, smp.param = "m", smp.causal_values = array<f64: 0.0, 1.0, 2.0>}) {
  return
}

// -----

// A boolean mask has no gradient.
func.func @mask_grad_bool(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %o: tensor<2x4x8x16xf32>, %l: tensor<2x4x8x2xf32>, %m: tensor<1x4x8x8xi1>) {
  // expected-error @+1 {{operand #6 must be}}
  %dm = smp.attention_mask_grad %q, %k, %v, %o, %l, %o, %m {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>, tensor<2x4x8x16xf32>, tensor<1x4x8x8xi1>) -> tensor<1x4x8x8xi1>
  return
}

// -----

func.func @mask_grad_type(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %o: tensor<2x4x8x16xf32>, %l: tensor<2x4x8x2xf32>, %m: tensor<1x4x8x8xf16>) {
  // expected-error @+2 {{'smp.attention_mask_grad' mask must be i1 or the query's element type, got 'tensor<1x4x8x8xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %dm = smp.attention_mask_grad %q, %k, %v, %o, %l, %o, %m {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>, tensor<2x4x8x16xf32>, tensor<1x4x8x8xf16>) -> tensor<1x4x8x8xf16>
  return
}

// -----

func.func @mask_grad_lse(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>, %o: tensor<2x4x8x16xf32>, %l: tensor<2x4xf32>, %m: tensor<1x4x8x8xf32>) {
  // expected-error @+2 {{'smp.attention_mask_grad' lse 'tensor<2x4xf32>' must be 'tensor<2x4x8x2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %dm = smp.attention_mask_grad %q, %k, %v, %o, %l, %o, %m {scale = 1.0 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4xf32>, tensor<2x4x8x16xf32>, tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// bshd: the heads are dim 2 (here 4 query heads over 3), not dim 1.
func.func @bshd_heads(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x3x16xf32>, %v: tensor<2x8x3x16xf32>) {
  // expected-error @+2 {{'smp.attention' query heads 4 are not a multiple of the key/value heads 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v {bshd = true, scale = 1.0 : f32} : (tensor<2x8x4x16xf32>, tensor<2x8x3x16xf32>, tensor<2x8x3x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8x2xf32>)
  return
}

// -----

func.func @bshd_rank(%q: tensor<8x4x16xf32>, %k: tensor<2x8x4x16xf32>, %v: tensor<2x8x4x16xf32>) {
  // expected-error @+2 {{'smp.attention' query must be rank 4 [batch, seq, heads, head_dim] (bshd), got 'tensor<8x4x16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.attention %q, %k, %v {bshd = true, scale = 1.0 : f32} : (tensor<8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8x2xf32>)
  return
}

// -----

// attention_grad's lse is [B, H, S, 2] in either layout.
func.func @bshd_grad_lse(%q: tensor<2x8x4x16xf32>, %o: tensor<2x8x4x16xf32>, %l: tensor<2x8x4x2xf32>) {
  // expected-error @+2 {{'smp.attention_grad' lse 'tensor<2x8x4x2xf32>' must be 'tensor<2x4x8x2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq, %dk, %dv = smp.attention_grad %q, %q, %q, %o, %l, %o {bshd = true, scale = 1.0 : f32} : (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x2xf32>, tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>)
  return
}

// -----

func.func @packed_rank(%x: tensor<2x3x64xf32>) {
  // expected-error @+2 {{'smp.packed_attention' qkv must be rank 4 [batch, seq, q heads + 2 kv heads, head_dim], got 'tensor<2x3x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.packed_attention %x {kv_heads = 2 : i64, scale = 1.0 : f32} : (tensor<2x3x64xf32>) -> (tensor<2x3x4x8xf32>, tensor<2x4x3x2xf32>)
  return
}

// -----

func.func @packed_heads(%x: tensor<2x3x7x8xf32>) {
  // expected-error @+2 {{'smp.packed_attention' qkv 'tensor<2x3x7x8xf32>' has 7 heads, not q heads + 2 kv heads with the q heads a positive multiple of kv_heads = 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.packed_attention %x {kv_heads = 2 : i64, scale = 1.0 : f32} : (tensor<2x3x7x8xf32>) -> (tensor<2x3x3x8xf32>, tensor<2x3x3x2xf32>)
  return
}

// -----

func.func @packed_mask(%x: tensor<2x3x8x8xf32>, %m: tensor<2x1x3x4xi1>) {
  // expected-error @+2 {{'smp.packed_attention' mask 'tensor<2x1x3x4xi1>' must be rank 4 with each dim 1 or that of [batch, heads, seq, key seq] = [2, 4, 3, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = smp.packed_attention %x, %m {kv_heads = 2 : i64, scale = 1.0 : f32} : (tensor<2x3x8x8xf32>, tensor<2x1x3x4xi1>) -> (tensor<2x3x4x8xf32>, tensor<2x4x3x2xf32>)
  return
}

// -----

func.func @packed_grad_lse(%x: tensor<2x3x8x8xf32>, %o: tensor<2x3x4x8xf32>, %l: tensor<2x3x4x2xf32>) {
  // expected-error @+2 {{'smp.packed_attention_grad' lse 'tensor<2x3x4x2xf32>' must be 'tensor<2x4x3x2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %g = smp.packed_attention_grad %x, %o, %l, %o {kv_heads = 2 : i64, scale = 1.0 : f32} : (tensor<2x3x8x8xf32>, tensor<2x3x4x8xf32>, tensor<2x3x4x2xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x8x8xf32>
  return
}
