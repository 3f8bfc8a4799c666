// smp-attention-layout (lib/Dialect/Smp/Transforms/AttentionLayout.cpp):
// an smp.attention whose q, k and v are transposes of [B, S, H, D] heads
// reads them untransposed (bshd = true), and its output's transposes back
// are its output. The gradient keeps the layout: no transpose of q, k, v,
// the output or their gradients is left in the training step.
// RUN: smp-opt %s --split-input-file --smp-attention-layout | FileCheck %s
// RUN: sed -n '1,/^\/\/ -----/p' %s | smp-opt --smp-attention-layout '--smp-build-gradients=loss=mse:y:target' | FileCheck %s --check-prefix=GRAD

// Grouped-query attention (4 query heads over 2) with a mask: the mask and
// the log-sum-exp keep their [B, H, S, ...] shapes. (GRAD trains this
// first function.)
// CHECK-LABEL: func.func @main
// CHECK-NOT: smp.transpose
// CHECK: %[[O:[^,]*]], %{{[^ ]*}} = smp.attention %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %arg1 {bshd = true, causal = true, scale = 5.000000e-01 : f32} : (tensor<2x3x4x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>, tensor<1x1x3x5xi1>) -> (tensor<2x3x4x4xf32>, tensor<2x4x3x2xf32>)
// CHECK-NOT: smp.transpose
// CHECK: %[[Y:.*]] = smp.reshape %[[O]] : tensor<2x3x4x4xf32> -> tensor<2x3x16xf32>
// CHECK: return %[[Y]]

// GRAD-LABEL: func.func @train_step
// GRAD-NOT: array<i64: 0, 2, 1, 3>
// GRAD: smp.attention_grad {{.*}} {bshd = true, causal = true, scale = 5.000000e-01 : f32, smp.bwd} : ({{.*}}) -> (tensor<2x3x4x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>)
// GRAD-NOT: array<i64: 0, 2, 1, 3>
func.func @main(%x: tensor<2x3x16xf32> {smp.input = "x"},
               %mask: tensor<1x1x3x5xi1> {smp.input = "mask"},
               %kv: tensor<2x5x16xf32> {smp.input = "kv"},
               %wq: tensor<16x16xf32> {smp.param = "wq"},
               %wk: tensor<16x8xf32> {smp.param = "wk"},
               %wv: tensor<16x8xf32> {smp.param = "wv"})
    -> (tensor<2x3x16xf32> {smp.output = "y"}) {
  %q = smp.matmul %x, %wq : (tensor<2x3x16xf32>, tensor<16x16xf32>) -> tensor<2x3x16xf32>
  %k = smp.matmul %kv, %wk : (tensor<2x5x16xf32>, tensor<16x8xf32>) -> tensor<2x5x8xf32>
  %v = smp.matmul %kv, %wv : (tensor<2x5x16xf32>, tensor<16x8xf32>) -> tensor<2x5x8xf32>
  %qh = smp.reshape %q : tensor<2x3x16xf32> -> tensor<2x3x4x4xf32>
  %kh = smp.reshape %k : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %vh = smp.reshape %v : tensor<2x5x8xf32> -> tensor<2x5x2x4xf32>
  %qt = smp.transpose %qh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x3x4x4xf32> -> tensor<2x4x3x4xf32>
  %kt = smp.transpose %kh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %vt = smp.transpose %vh {perm = array<i64: 0, 2, 1, 3>} : tensor<2x5x2x4xf32> -> tensor<2x2x5x4xf32>
  %o, %l = smp.attention %qt, %kt, %vt, %mask {causal = true, scale = 0.5 : f32} : (tensor<2x4x3x4xf32>, tensor<2x2x5x4xf32>, tensor<2x2x5x4xf32>, tensor<1x1x3x5xi1>) -> (tensor<2x4x3x4xf32>, tensor<2x4x3x2xf32>)
  %ot = smp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x3x4xf32> -> tensor<2x3x4x4xf32>
  %y = smp.reshape %ot : tensor<2x3x4x4xf32> -> tensor<2x3x16xf32>
  return %y : tensor<2x3x16xf32>
}

// -----

// The output is also read heads-first: one transpose back for that use; the
// three input transposes still go.
// CHECK-LABEL: func.func @output_read_heads_first
// CHECK-NOT: smp.transpose
// CHECK: %[[O:[^,]*]], %{{[^ ]*}} = smp.attention %arg0, %arg1, %arg2 {bshd = true, scale = 1.000000e+00 : f32} : (tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4x2xf32>)
// CHECK: %[[T:.*]] = smp.transpose %[[O]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NOT: smp.transpose
// CHECK: return %[[O]], %[[T]]
func.func @output_read_heads_first(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>, %v: tensor<1x4x2x8xf32>) -> (tensor<1x4x2x8xf32>, tensor<1x2x4x8xf32>) {
  %qt = smp.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %kt = smp.transpose %k {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %vt = smp.transpose %v {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %o, %l = smp.attention %qt, %kt, %vt {scale = 1.0 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x2xf32>)
  %ot = smp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
  return %ot, %o : tensor<1x4x2x8xf32>, tensor<1x2x4x8xf32>
}

// -----

// k is not a transpose (another permutation): nothing changes.
// CHECK-LABEL: func.func @not_all_transposed
// CHECK-COUNT-3: smp.transpose
// CHECK: smp.attention %{{[^{]*}} {scale = 1.000000e+00 : f32}
// CHECK-NOT: bshd
func.func @not_all_transposed(%q: tensor<1x4x2x8xf32>, %k: tensor<1x2x8x4xf32>, %v: tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32> {
  %qt = smp.transpose %q {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %kt = smp.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x8x4xf32> -> tensor<1x2x4x8xf32>
  %vt = smp.transpose %v {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %o, %l = smp.attention %qt, %kt, %vt {scale = 1.0 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x2xf32>)
  return %o : tensor<1x2x4x8xf32>
}

// -----

// Self-attention reading one transpose as q, k and v: it goes once.
// CHECK-LABEL: func.func @one_transpose_for_all
// CHECK-NOT: smp.transpose
// CHECK: %[[O:[^,]*]], %{{[^ ]*}} = smp.attention %arg0, %arg0, %arg0 {bshd = true, scale = 1.000000e+00 : f32}
// CHECK-NOT: smp.transpose
// CHECK: return %[[O]]
func.func @one_transpose_for_all(%x: tensor<1x4x2x8xf32>) -> tensor<1x4x2x8xf32> {
  %t = smp.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %o, %l = smp.attention %t, %t, %t {scale = 1.0 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x2xf32>)
  %ot = smp.transpose %o {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
  return %ot : tensor<1x4x2x8xf32>
}
