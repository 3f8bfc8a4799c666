// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-raise-attention))' | FileCheck %s
// RUN: smp-opt %s -split-input-file -smp-raise | FileCheck %s

// A hand-written GPT attention: k^T as one transpose of the split heads, the
// scale on the scores, a causal buffer applied as where(mask == 0, -inf, s).
// CHECK-LABEL: func.func @gpt
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K4:.*]]: tensor<2x8x4x16xf32>, %[[V:.*]]: tensor<2x4x8x16xf32>, %[[B:.*]]: tensor<1x1x8x8xf32>
// CHECK-DAG: %[[K:.*]] = smp.transpose %[[K4]] {perm = array<i64: 0, 2, 1, 3>}
// CHECK-DAG: %[[EQ:.*]] = smp.equal %[[B]]
// CHECK-DAG: %[[KEEP:.*]] = smp.not %[[EQ]]
// CHECK: %[[O:.*]], %{{.*}} = smp.attention %[[Q]], %[[K]], %[[V]], %[[KEEP]] {scale = 2.500000e-01 : f32}
// CHECK-NOT: smp.softmax
// CHECK: return %[[O]]
func.func @gpt(%q: tensor<2x4x8x16xf32>, %k4: tensor<2x8x4x16xf32>,
               %v: tensor<2x4x8x16xf32>, %bias: tensor<1x1x8x8xf32>)
    -> tensor<2x4x8x16xf32> {
  %zero = smp.constant dense<0.0> : tensor<f32>
  %ninf = smp.constant dense<0xFF800000> : tensor<f32>
  %scale = smp.constant dense<0.25> : tensor<f32>
  %kt = smp.transpose %k4 {perm = array<i64: 0, 2, 3, 1>} : tensor<2x8x4x16xf32> -> tensor<2x4x16x8xf32>
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %ss = smp.mul %s, %scale : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %masked = smp.equal %bias, %zero : (tensor<1x1x8x8xf32>, tensor<f32>) -> tensor<1x1x8x8xi1>
  %sm = smp.where %masked, %ninf, %ss : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %sm {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// PyTorch's scaled_dot_product_attention as torch.onnx.export writes it:
// sqrt(scale) on q and on k^T (a reshape, swap, reshape of k), an additive
// mask [B, 1, S, S], and the guard turning a fully masked row's NaN into 0.
// CHECK-LABEL: func.func @sdpa_export
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x4x8x16xf32>, %[[V:.*]]: tensor<2x4x8x16xf32>, %[[M:.*]]: tensor<2x1x8x8xf32> {smp.frozen, smp.param = "mask"})
// CHECK: %[[O:.*]], %{{.*}} = smp.attention %[[Q]], %[[K]], %[[V]], %[[M]] {scale = 2.500000e-01 : f32}
// CHECK-NOT: smp.softmax
// CHECK-NOT: smp.matmul
// CHECK: return %[[O]]
func.func @sdpa_export(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>,
                       %v: tensor<2x4x8x16xf32>,
                       %m: tensor<2x1x8x8xf32> {smp.frozen, smp.param = "mask"})
    -> tensor<2x4x8x16xf32> {
  %c = smp.constant dense<0.5> : tensor<f32>
  %zero = smp.constant dense<0.0> : tensor<f32>
  %qs = smp.mul %q, %c : (tensor<2x4x8x16xf32>, tensor<f32>) -> tensor<2x4x8x16xf32>
  %k3 = smp.reshape %k : tensor<2x4x8x16xf32> -> tensor<8x8x16xf32>
  %kt3 = smp.transpose %k3 {perm = array<i64: 0, 2, 1>} : tensor<8x8x16xf32> -> tensor<8x16x8xf32>
  %kt = smp.reshape %kt3 : tensor<8x16x8xf32> -> tensor<2x4x16x8xf32>
  %kts = smp.mul %kt, %c : (tensor<2x4x16x8xf32>, tensor<f32>) -> tensor<2x4x16x8xf32>
  %s = smp.matmul %qs, %kts : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %sm = smp.add %s, %m : (tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %sm {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %nan = smp.equal %p, %p : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xi1>
  %isnan = smp.not %nan : tensor<2x4x8x8xi1>
  %pg = smp.where %isnan, %zero, %p : (tensor<2x4x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %o = smp.matmul %pg, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Grouped-query attention (Llama's repeat_kv stays before the op), no mask,
// the scale as a division, both a boolean and a float mask: one float mask
// where(keep, bias, -inf).
// CHECK-LABEL: func.func @two_masks
// CHECK-SAME: %[[BIAS:[^:]*]]: tensor<1x1x8x8xf32>, %[[KEEP:[^:]*]]: tensor<2x1x1x8xi1>)
// CHECK: %[[NINF:.*]] = smp.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[M:.*]] = smp.where %[[KEEP]], %[[BIAS]], %[[NINF]]
// CHECK: smp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {scale = 1.250000e-01 : f32} : {{.*}}tensor<2x1x8x8xf32>)
func.func @two_masks(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                     %v: tensor<2x4x8x16xf32>, %bias: tensor<1x1x8x8xf32>,
                     %keep: tensor<2x1x1x8xi1>) -> tensor<2x4x8x16xf32> {
  %ninf = smp.constant dense<0xFF800000> : tensor<f32>
  %d = smp.constant dense<8.0> : tensor<f32>
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %ss = smp.div %s, %d : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %sb = smp.add %ss, %bias : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %sm = smp.where %keep, %sb, %ninf : (tensor<2x1x1x8xi1>, tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %sm {axis = -1 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// A trainable additive bias (T5's relative position bias) fuses: its
// gradient is smp.attention_mask_grad's (build-gradients-attention.mlir).
// CHECK-LABEL: func.func @trainable_bias
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<1x4x8x8xf32> {smp.param = "rel_bias"}
// CHECK: smp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[B]] {scale = 1.000000e+00 : f32}
// CHECK-NOT: smp.softmax
func.func @trainable_bias(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                          %v: tensor<2x4x8x16xf32>,
                          %b: tensor<1x4x8x8xf32> {smp.param = "rel_bias"})
    -> tensor<2x4x8x16xf32> {
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %sb = smp.add %s, %b : (tensor<2x4x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %sb {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// f64 stays unfused (the fused kernels compute in f32), in f64.
// CHECK-LABEL: func.func @f64_unfused
// CHECK-NOT: smp.attention
// CHECK: smp.softmax
func.func @f64_unfused(%q: tensor<2x4x8x16xf64>, %kt: tensor<2x4x16x8xf64>,
                       %v: tensor<2x4x8x16xf64>) -> tensor<2x4x8x16xf64> {
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf64>, tensor<2x4x16x8xf64>) -> tensor<2x4x8x8xf64>
  %p = smp.softmax %s {axis = 3 : i64} : tensor<2x4x8x8xf64>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf64>, tensor<2x4x8x16xf64>) -> tensor<2x4x8x16xf64>
  return %o : tensor<2x4x8x16xf64>
}

// -----

// Stay unfused: probabilities the model also returns, a scale applied after
// the mask (it would scale the mask), and a finite fill (HF's finfo.min
// where(): a fully masked row would average, not give 0).
// CHECK-LABEL: func.func @probs_returned
// CHECK-NOT: smp.attention
func.func @probs_returned(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                          %v: tensor<2x4x8x16xf32>)
    -> (tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>) {
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %s {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o, %p : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>
}

// -----

// CHECK-LABEL: func.func @scale_after_mask
// CHECK-NOT: smp.attention
func.func @scale_after_mask(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                            %v: tensor<2x4x8x16xf32>, %m: tensor<1x1x8x8xf32>)
    -> tensor<2x4x8x16xf32> {
  %c = smp.constant dense<0.25> : tensor<f32>
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %sm = smp.add %s, %m : (tensor<2x4x8x8xf32>, tensor<1x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %ss = smp.mul %sm, %c : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %ss {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// CHECK-LABEL: func.func @finite_fill
// CHECK-NOT: smp.attention
func.func @finite_fill(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                       %v: tensor<2x4x8x16xf32>, %masked: tensor<1x1x8x8xi1>)
    -> tensor<2x4x8x16xf32> {
  %min = smp.constant dense<-3.40282347E+38> : tensor<f32>
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %sm = smp.where %masked, %min, %s : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %sm {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Two layers reading one computed causal mask [8, 8]: it is reshaped to
// [1, 1, 8, 8] and inverted once for both fused attentions, not per layer
// (whichever layer is raised first).
// CHECK-LABEL: func.func @shared_mask
// CHECK: %[[M:.*]] = smp.trilu
// CHECK: %[[R:.*]] = smp.reshape %[[M]] : tensor<8x8xi1> -> tensor<1x1x8x8xi1>
// CHECK-NEXT: %[[KEEP:.*]] = smp.not %[[R]]
// CHECK: %[[O1:.*]], %{{.*}} = smp.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[KEEP]]
// CHECK: smp.attention %[[O1]], %{{.*}}, %{{.*}}, %[[KEEP]]
// CHECK-NOT: smp.not
// CHECK-NOT: smp.reshape
func.func @shared_mask(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                       %v: tensor<2x4x8x16xf32>, %ones: tensor<8x8xi1>)
    -> tensor<2x4x8x16xf32> {
  %ninf = smp.constant dense<0xFF800000> : tensor<f32>
  %future = smp.trilu %ones {k = 1 : i64, upper = true} : tensor<8x8xi1>
  %s1 = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %m1 = smp.where %future, %ninf, %s1 : (tensor<8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p1 = smp.softmax %m1 {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o1 = smp.matmul %p1, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %s2 = smp.matmul %o1, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %m2 = smp.where %future, %ninf, %s2 : (tensor<8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p2 = smp.softmax %m2 {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o2 = smp.matmul %p2, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o2 : tensor<2x4x8x16xf32>
}

// -----

// Causal masks become `causal = true` and no mask operand: a trilu of ones
// above the diagonal as the masked-out condition (nanoGPT at long contexts).
// CHECK-LABEL: func.func @causal_trilu
// CHECK-NOT: smp.trilu
// CHECK: %[[O:.*]], %{{.*}} = smp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 1.000000e+00 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>)
// CHECK-NOT: smp.not
// CHECK: return %[[O]]
func.func @causal_trilu(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                        %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %ninf = smp.constant dense<0xFF800000> : tensor<f32>
  %ones = smp.constant dense<true> : tensor<8x8xi1>
  %future = smp.trilu %ones {k = 1 : i64, upper = true} : tensor<8x8xi1>
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %m = smp.where %future, %ninf, %s : (tensor<8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// A folded bool constant that keeps j <= i (where(keep, s, -inf)), reshaped
// to [1, 1, 4, 4]; and a folded additive one of 0 and finfo.min (Hugging
// Face's), broadcast over the batch.
// CHECK-LABEL: func.func @causal_constants
// CHECK: smp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 1.000000e+00 : f32} : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>)
// CHECK: smp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 1.000000e+00 : f32} : (tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>, tensor<2x4x4x16xf32>)
// CHECK-NOT: smp.constant dense<{{.*}}> : tensor<{{.*}}4x4x
func.func @causal_constants(%q: tensor<2x4x4x16xf32>, %kt: tensor<2x4x16x4xf32>,
                            %v: tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32> {
  %ninf = smp.constant dense<0xFF800000> : tensor<f32>
  %keep = smp.constant dense<[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %keep4 = smp.reshape %keep : tensor<4x4xi1> -> tensor<1x1x4x4xi1>
  %s = smp.matmul %q, %kt : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %m = smp.where %keep4, %s, %ninf : (tensor<1x1x4x4xi1>, tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
  %p = smp.softmax %m {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %add = smp.constant dense<[[[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]], [[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]]]> : tensor<2x1x4x4xf32>
  %s2 = smp.matmul %o, %kt : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %m2 = smp.add %s2, %add : (tensor<2x4x4x4xf32>, tensor<2x1x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p2 = smp.softmax %m2 {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %o2 = smp.matmul %p2, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  return %o2 : tensor<2x4x4x16xf32>
}

// -----

// Frozen buffers the importer read (smp.causal_values): Hugging Face's folded
// [B, 1, S, S] mask of 0 and finfo.min, and the legacy export's tril buffer
// of ones, sliced to the sequence and compared with 0.
// CHECK-LABEL: func.func @causal_buffers
// CHECK: smp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 1.000000e+00 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
// CHECK: smp.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, scale = 1.000000e+00 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
// CHECK-NOT: smp.equal
// CHECK-NOT: smp.slice
func.func @causal_buffers(%q: tensor<2x4x8x16xf32>, %kt: tensor<2x4x16x8xf32>,
                          %v: tensor<2x4x8x16xf32>,
                          %hf: tensor<2x1x8x8xf32> {smp.causal_values = array<f64: 0.0, -3.4028234663852886e+38>, smp.frozen, smp.param = "val_160"},
                          %tril: tensor<1x1x16x16xf32> {smp.causal_values = array<f64: 1.0, 0.0>, smp.frozen, smp.param = "h.0.attn.bias"})
    -> tensor<2x4x8x16xf32> {
  %ninf = smp.constant dense<0xFF800000> : tensor<f32>
  %zero = smp.constant dense<0.0> : tensor<f32>
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %m = smp.add %s, %hf : (tensor<2x4x8x8xf32>, tensor<2x1x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %b = smp.slice %tril {limits = array<i64: 1, 1, 8, 8>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>} : tensor<1x1x16x16xf32> -> tensor<1x1x8x8xf32>
  %out = smp.equal %b, %zero : (tensor<1x1x8x8xf32>, tensor<f32>) -> tensor<1x1x8x8xi1>
  %s2 = smp.matmul %o, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %m2 = smp.where %out, %ninf, %s2 : (tensor<1x1x8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p2 = smp.softmax %m2 {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o2 = smp.matmul %p2, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o2 : tensor<2x4x8x16xf32>
}

// -----

// Not causal, the mask stays an operand: a fill of -10000 (BERT's; exp of
// it is not exactly 0 for every score), a mask whose first row also hides
// key 0 (padding), a frozen buffer whose values the importer did not find
// causal (no smp.causal_values), and keys longer than the queries.
// CHECK-LABEL: func.func @not_causal
// CHECK-COUNT-4: smp.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{[^ ]*}} {scale
// CHECK-NOT: causal = true
func.func @not_causal(%q: tensor<2x4x4x16xf32>, %kt: tensor<2x4x16x4xf32>,
                      %v: tensor<2x4x4x16xf32>, %kt6: tensor<2x4x16x6xf32>,
                      %v6: tensor<2x4x6x16xf32>,
                      %buffer: tensor<4x4xf32> {smp.frozen, smp.param = "w"}) -> tensor<2x4x4x16xf32> {
  %ninf = smp.constant dense<0xFF800000> : tensor<f32>
  %soft = smp.constant dense<[[0.0, -1.0E+4, -1.0E+4, -1.0E+4], [0.0, 0.0, -1.0E+4, -1.0E+4], [0.0, 0.0, 0.0, -1.0E+4], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %s = smp.matmul %q, %kt : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %m = smp.add %s, %soft : (tensor<2x4x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4x4xf32>
  %p = smp.softmax %m {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %pad = smp.constant dense<[[false, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %s2 = smp.matmul %o, %kt : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %m2 = smp.where %pad, %s2, %ninf : (tensor<4x4xi1>, tensor<2x4x4x4xf32>, tensor<f32>) -> tensor<2x4x4x4xf32>
  %p2 = smp.softmax %m2 {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %o2 = smp.matmul %p2, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %zero = smp.constant dense<0.0> : tensor<f32>
  %tmask = smp.equal %buffer, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %s3 = smp.matmul %o2, %kt : (tensor<2x4x4x16xf32>, tensor<2x4x16x4xf32>) -> tensor<2x4x4x4xf32>
  %m3 = smp.where %tmask, %ninf, %s3 : (tensor<4x4xi1>, tensor<f32>, tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %p3 = smp.softmax %m3 {axis = 3 : i64} : tensor<2x4x4x4xf32>
  %o3 = smp.matmul %p3, %v : (tensor<2x4x4x4xf32>, tensor<2x4x4x16xf32>) -> tensor<2x4x4x16xf32>
  %wide = smp.constant dense<true> : tensor<4x6xi1>
  %future = smp.trilu %wide {k = 1 : i64, upper = true} : tensor<4x6xi1>
  %s4 = smp.matmul %o3, %kt6 : (tensor<2x4x4x16xf32>, tensor<2x4x16x6xf32>) -> tensor<2x4x4x6xf32>
  %m4 = smp.where %future, %ninf, %s4 : (tensor<4x6xi1>, tensor<f32>, tensor<2x4x4x6xf32>) -> tensor<2x4x4x6xf32>
  %p4 = smp.softmax %m4 {axis = 3 : i64} : tensor<2x4x4x6xf32>
  %o4 = smp.matmul %p4, %v6 : (tensor<2x4x4x6xf32>, tensor<2x4x6x16xf32>) -> tensor<2x4x4x16xf32>
  return %o4 : tensor<2x4x4x16xf32>
}

// -----

// Grouped-query attention as Hugging Face's repeat_kv writes it: 2 key/value
// heads reshaped to [B, 2, 1, S, D], expanded to [B, 2, 2, S, D] and
// reshaped to 4 heads. The op reads the 2 heads themselves (query head h
// reads key/value head h / 2); the copies are gone.
// CHECK-LABEL: func.func @gqa_repeat_kv
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x2x8x16xf32>, %[[V:.*]]: tensor<2x2x8x16xf32>)
// CHECK-NOT: smp.expand
// CHECK: %[[O:.*]], %{{.*}} = smp.attention %[[Q]], %[[K]], %[[V]] {causal = true, scale = 2.500000e-01 : f32} : (tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x2xf32>)
// CHECK-NOT: smp.expand
// CHECK: return %[[O]]
func.func @gqa_repeat_kv(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>,
                         %v: tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %ninf = smp.constant dense<0xFF800000> : tensor<f32>
  %scale = smp.constant dense<0.25> : tensor<f32>
  %ones = smp.constant dense<true> : tensor<8x8xi1>
  %future = smp.trilu %ones {k = 1 : i64, upper = true} : tensor<8x8xi1>
  %k5 = smp.reshape %k : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %ke = smp.expand %k5 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %kr = smp.reshape %ke : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %v5 = smp.reshape %v : tensor<2x2x8x16xf32> -> tensor<2x2x1x8x16xf32>
  %ve = smp.expand %v5 : tensor<2x2x1x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %vr = smp.reshape %ve : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %kt = smp.transpose %kr {perm = array<i64: 0, 1, 3, 2>} : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %s = smp.matmul %q, %kt : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  %ss = smp.mul %s, %scale : (tensor<2x4x8x8xf32>, tensor<f32>) -> tensor<2x4x8x8xf32>
  %m = smp.where %future, %ninf, %ss : (tensor<8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %m {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %vr : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// The heads repeated the other way (tiled: [B, 1, 2, S, D] expanded to
// [B, 2, 2, S, D], so query head h reads key/value head h % 2) is not the
// op's pairing: the op reads the repeated tensors.
// CHECK-LABEL: func.func @gqa_tiled
// CHECK: %[[KE:.*]] = smp.expand
// CHECK: %[[KR:.*]] = smp.reshape %[[KE]] : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
// CHECK: smp.attention %{{.*}}, %[[KR]], %{{.*}} {scale = 1.000000e+00 : f32} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
func.func @gqa_tiled(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>,
                     %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %k5 = smp.reshape %k : tensor<2x2x8x16xf32> -> tensor<2x1x2x8x16xf32>
  %ke = smp.expand %k5 : tensor<2x1x2x8x16xf32> -> tensor<2x2x2x8x16xf32>
  %kr = smp.reshape %ke : tensor<2x2x2x8x16xf32> -> tensor<2x4x8x16xf32>
  %s = smp.matmul %q, %kr {transpose_rhs = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %p = smp.softmax %s {axis = 3 : i64} : tensor<2x4x8x8xf32>
  %o = smp.matmul %p, %v : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}
