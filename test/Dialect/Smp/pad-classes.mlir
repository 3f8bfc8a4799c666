// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-pad-classes{min-classes=8}))' | FileCheck %s
// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-pad-classes))' | FileCheck %s --check-prefix=DEFAULT
// The pass: lib/Dialect/Smp/Transforms/PadClasses.cpp. The small class
// counts here are padded with min-classes=8; by default (1024) only
// GPT-2's 50257 is.
// DEFAULT-LABEL: func.func @tied_head
// DEFAULT-NOT: classes
// DEFAULT-LABEL: func.func @untied_bias
// DEFAULT: classes = 50257
// DEFAULT-LABEL: func.func @bias_grad_epilogue
// DEFAULT-NOT: classes
// DEFAULT-LABEL: func.func @rank_reader

// GPT-2's tied LM head in bf16 (the step as the clean-up phase leaves it),
// 101 classes: the weight gets 3 zero rows before the product (with its
// annotations), the loss and its gradient read 101 of the 104 columns, the
// input gradient contracts the padded weight, the weight gradient is
// sliced back to 101 rows; the embedding's gather keeps the weight.
// CHECK-LABEL: func.func @tied_head
// CHECK: %[[E:.*]] = smp.gather %arg1, %arg0
// CHECK: %[[Z:.*]] = smp.constant {smp.stage = 1 : i64} dense<0.000000e+00> : tensor<3x64xbf16>
// CHECK: %[[WP:.*]] = smp.concat %arg1, %[[Z]] {axis = 0 : i64, smp.stage = 1 : i64} : (tensor<101x64xbf16>, tensor<3x64xbf16>) -> tensor<104x64xbf16>
// CHECK: %[[L:.*]] = smp.matmul %arg2, %[[WP]] {smp.stage = 1 : i64, transpose_rhs = true} : (tensor<4x32x64xbf16>, tensor<104x64xbf16>) -> tensor<4x32x104xbf16>
// CHECK: %[[LOSS:.*]] = smp.cross_entropy %[[L]], %arg3 {classes = 101 : i64} : (tensor<4x32x104xbf16>, tensor<4x32xi64>) -> tensor<f32>
// CHECK: %[[G:.*]] = smp.cross_entropy_grad %[[L]], %arg3, %arg4 {classes = 101 : i64} : (tensor<4x32x104xbf16>, tensor<4x32xi64>, tensor<f32>) -> tensor<4x32x104xbf16>
// CHECK: %[[DH:.*]] = smp.matmul %[[G]], %[[WP]] : (tensor<4x32x104xbf16>, tensor<104x64xbf16>) -> tensor<4x32x64xbf16>
// CHECK: %[[G2:.*]] = smp.reshape %[[G]] : tensor<4x32x104xbf16> -> tensor<128x104xbf16>
// CHECK: %[[DWP:.*]] = smp.matmul %[[G2]], %{{.*}} {smp.bwd, transpose_lhs = true} : (tensor<128x104xbf16>, tensor<128x64xbf16>) -> tensor<104x64xbf16>
// CHECK: %[[DW:.*]] = smp.slice %[[DWP]] {limits = array<i64: 101, 64>, smp.bwd, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<104x64xbf16> -> tensor<101x64xbf16>
// CHECK: smp.add %[[DW]], %{{.*}} : (tensor<101x64xbf16>, tensor<101x64xbf16>)
func.func @tied_head(%ids: tensor<4x32xi64>, %w: tensor<101x64xbf16>, %h: tensor<4x32x64xbf16>, %y: tensor<4x32xi64>, %seed: tensor<f32>) -> (tensor<f32>, tensor<4x32x64xbf16>, tensor<101x64xbf16>) {
  %e = smp.gather %w, %ids {axis = 0 : i64} : (tensor<101x64xbf16>, tensor<4x32xi64>) -> tensor<4x32x64xbf16>
  %l = smp.matmul %h, %w {transpose_rhs = true, smp.stage = 1 : i64} : (tensor<4x32x64xbf16>, tensor<101x64xbf16>) -> tensor<4x32x101xbf16>
  %loss = smp.cross_entropy %l, %y : (tensor<4x32x101xbf16>, tensor<4x32xi64>) -> tensor<f32>
  %g = smp.cross_entropy_grad %l, %y, %seed : (tensor<4x32x101xbf16>, tensor<4x32xi64>, tensor<f32>) -> tensor<4x32x101xbf16>
  %dh = smp.matmul %g, %w : (tensor<4x32x101xbf16>, tensor<101x64xbf16>) -> tensor<4x32x64xbf16>
  %h2 = smp.reshape %h : tensor<4x32x64xbf16> -> tensor<128x64xbf16>
  %g2 = smp.reshape %g : tensor<4x32x101xbf16> -> tensor<128x101xbf16>
  %dw = smp.matmul %g2, %h2 {transpose_lhs = true, smp.bwd} : (tensor<128x101xbf16>, tensor<128x64xbf16>) -> tensor<101x64xbf16>
  %de = smp.gather_grad %ids, %dh {axis = 0 : i64} : (tensor<4x32xi64>, tensor<4x32x64xbf16>) -> tensor<101x64xbf16>
  %sum = smp.add %dw, %de : (tensor<101x64xbf16>, tensor<101x64xbf16>) -> tensor<101x64xbf16>
  return %loss, %dh, %sum : tensor<f32>, tensor<4x32x64xbf16>, tensor<101x64xbf16>
}

// -----

// An untied f32 head with a bias, its weight [C, V] (padded columns), class
// weights and GPT-2's vocabulary: 50257 -> 50304 (a multiple of 64). The
// bias is padded too; the weight gradient h^T g is sliced along its
// columns, the bias gradient (a sum over the tokens) along its last dim.
// CHECK-LABEL: func.func @untied_bias
// CHECK: %[[WP:.*]] = smp.concat %arg1, %{{.*}} {axis = 1 : i64} : (tensor<16x50257xf32>, tensor<16x47xf32>) -> tensor<16x50304xf32>
// CHECK: %[[BP:.*]] = smp.concat %arg2, %{{.*}} {axis = 0 : i64} : (tensor<50257xf32>, tensor<47xf32>) -> tensor<50304xf32>
// CHECK: %[[L:.*]] = smp.matmul_bias %arg0, %[[WP]], %[[BP]] : (tensor<8x16xf32>, tensor<16x50304xf32>, tensor<50304xf32>) -> tensor<8x50304xf32>
// CHECK: smp.cross_entropy %[[L]], %arg3, %arg5 {classes = 50257 : i64, reduction = #smp<reduction sum>} : (tensor<8x50304xf32>, tensor<8xi64>, tensor<50257xf32>) -> tensor<f32>
// CHECK: %[[G:.*]] = smp.cross_entropy_grad %[[L]], %arg3, %arg4 weights %arg5 {classes = 50257 : i64, reduction = #smp<reduction sum>}
// CHECK: %[[DH:.*]] = smp.matmul %[[G]], %[[WP]] {transpose_rhs = true} : (tensor<8x50304xf32>, tensor<16x50304xf32>) -> tensor<8x16xf32>
// CHECK: %[[DWP:.*]] = smp.matmul %arg0, %[[G]] {transpose_lhs = true} : (tensor<8x16xf32>, tensor<8x50304xf32>) -> tensor<16x50304xf32>
// CHECK: %[[DW:.*]] = smp.slice %[[DWP]] {limits = array<i64: 16, 50257>, {{.*}}} : tensor<16x50304xf32> -> tensor<16x50257xf32>
// CHECK: %[[DBP:.*]] = smp.reduce_sum %[[G]] {axes = array<i64: 0>, keepdims = false} : tensor<8x50304xf32> -> tensor<50304xf32>
// CHECK: %[[DB:.*]] = smp.slice %[[DBP]] {limits = array<i64: 50257>, {{.*}}} : tensor<50304xf32> -> tensor<50257xf32>
// CHECK: return %{{.*}}, %[[DH]], %[[DW]], %[[DB]]
func.func @untied_bias(%h: tensor<8x16xf32>, %w: tensor<16x50257xf32>, %b: tensor<50257xf32>, %y: tensor<8xi64>, %seed: tensor<f32>, %cw: tensor<50257xf32>) -> (tensor<f32>, tensor<8x16xf32>, tensor<16x50257xf32>, tensor<50257xf32>) {
  %l = smp.matmul_bias %h, %w, %b : (tensor<8x16xf32>, tensor<16x50257xf32>, tensor<50257xf32>) -> tensor<8x50257xf32>
  %loss = smp.cross_entropy %l, %y, %cw {reduction = #smp<reduction sum>} : (tensor<8x50257xf32>, tensor<8xi64>, tensor<50257xf32>) -> tensor<f32>
  %g = smp.cross_entropy_grad %l, %y, %seed weights %cw {reduction = #smp<reduction sum>} : (tensor<8x50257xf32>, tensor<8xi64>, tensor<50257xf32>, tensor<f32>) -> tensor<8x50257xf32>
  %dh = smp.matmul %g, %w {transpose_rhs = true} : (tensor<8x50257xf32>, tensor<16x50257xf32>) -> tensor<8x16xf32>
  %dw = smp.matmul %h, %g {transpose_lhs = true} : (tensor<8x16xf32>, tensor<8x50257xf32>) -> tensor<16x50257xf32>
  %db = smp.reduce_sum %g {axes = array<i64: 0>, keepdims = false} : tensor<8x50257xf32> -> tensor<50257xf32>
  return %loss, %dh, %dw, %db : tensor<f32>, tensor<8x16xf32>, tensor<16x50257xf32>, tensor<50257xf32>
}

// -----

// bf16 with the bias gradient fused into the weight gradient's product
// (smp-fuse-bias-grad ran first): both of its results are sliced.
// CHECK-LABEL: func.func @bias_grad_epilogue
// CHECK: %[[DW:.*]], %[[DB:.*]] = smp.matmul_bias_grad %{{.*}}, %arg0 : (tensor<8x104xbf16>, tensor<8x16xbf16>) -> (tensor<104x16xbf16>, tensor<104xbf16>)
// CHECK: %[[W:.*]] = smp.slice %[[DW]] {{.*}} : tensor<104x16xbf16> -> tensor<100x16xbf16>
// CHECK: %[[B:.*]] = smp.slice %[[DB]] {{.*}} : tensor<104xbf16> -> tensor<100xbf16>
// CHECK: return %{{.*}}, %[[W]], %[[B]]
func.func @bias_grad_epilogue(%h: tensor<8x16xbf16>, %w: tensor<100x16xbf16>, %b: tensor<100xbf16>, %y: tensor<8xi64>, %seed: tensor<f32>) -> (tensor<f32>, tensor<100x16xbf16>, tensor<100xbf16>) {
  %l = smp.matmul_bias %h, %w, %b {transpose_rhs = true} : (tensor<8x16xbf16>, tensor<100x16xbf16>, tensor<100xbf16>) -> tensor<8x100xbf16>
  %loss = smp.cross_entropy %l, %y : (tensor<8x100xbf16>, tensor<8xi64>) -> tensor<f32>
  %g = smp.cross_entropy_grad %l, %y, %seed : (tensor<8x100xbf16>, tensor<8xi64>, tensor<f32>) -> tensor<8x100xbf16>
  %dw, %db = smp.matmul_bias_grad %g, %h : (tensor<8x100xbf16>, tensor<8x16xbf16>) -> (tensor<100x16xbf16>, tensor<100xbf16>)
  return %loss, %dw, %db : tensor<f32>, tensor<100x16xbf16>, tensor<100xbf16>
}

// -----

// The backward contracts the gradient with another value than the head's
// weight (ZeRO-3 gathers the weight again for it; here transposed, batched
// 2 x 8 tokens): that value gets zeros along its class axis before its
// product.
// CHECK-LABEL: func.func @regathered
// CHECK: %[[WP:.*]] = smp.concat %arg1, %{{.*}} {axis = 1 : i64, smp.stage = 1 : i64} : (tensor<16x101xf32>, tensor<16x3xf32>) -> tensor<16x104xf32>
// CHECK: smp.matmul %arg0, %[[WP]] {smp.stage = 1 : i64} : (tensor<2x8x16xf32>, tensor<16x104xf32>) -> tensor<2x8x104xf32>
// CHECK: %[[G:.*]] = smp.cross_entropy_grad
// CHECK: %[[Z:.*]] = smp.constant {smp.bwd} dense<0.000000e+00> : tensor<3x16xf32>
// CHECK: %[[VP:.*]] = smp.concat %arg2, %[[Z]] {axis = 0 : i64, smp.bwd} : (tensor<101x16xf32>, tensor<3x16xf32>) -> tensor<104x16xf32>
// CHECK: %[[DH:.*]] = smp.matmul %[[G]], %[[VP]] {smp.bwd} : (tensor<2x8x104xf32>, tensor<104x16xf32>) -> tensor<2x8x16xf32>
// CHECK: return %{{.*}}, %[[DH]]
func.func @regathered(%h: tensor<2x8x16xf32>, %w: tensor<16x101xf32>, %v: tensor<101x16xf32>, %y: tensor<2x8xi64>, %seed: tensor<f32>) -> (tensor<f32>, tensor<2x8x16xf32>) {
  %l = smp.matmul %h, %w {smp.stage = 1 : i64} : (tensor<2x8x16xf32>, tensor<16x101xf32>) -> tensor<2x8x101xf32>
  %loss = smp.cross_entropy %l, %y : (tensor<2x8x101xf32>, tensor<2x8xi64>) -> tensor<f32>
  %g = smp.cross_entropy_grad %l, %y, %seed : (tensor<2x8x101xf32>, tensor<2x8xi64>, tensor<f32>) -> tensor<2x8x101xf32>
  %dh = smp.matmul %g, %v {smp.bwd} : (tensor<2x8x101xf32>, tensor<101x16xf32>) -> tensor<2x8x16xf32>
  return %loss, %dh : tensor<f32>, tensor<2x8x16xf32>
}

// -----

// What stays: aligned classes (96), logits that are also an output, logits
// a softmax reads, a gradient another op reads, a head whose weight is
// batched, and a gradient contracted with a view of itself.
// CHECK-LABEL: func.func @not_padded
// CHECK-NOT: classes
// CHECK-NOT: smp.concat
// CHECK-NOT: smp.slice
func.func @not_padded(%h: tensor<8x16xf32>, %w96: tensor<96x16xf32>, %w: tensor<101x16xf32>, %v: tensor<101x16xf32>, %wb: tensor<2x16x101xf32>, %hb: tensor<2x8x16xf32>, %y: tensor<8xi64>, %yb: tensor<2x8xi64>, %seed: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<8x101xf32>, tensor<f32>, tensor<2x8x101xf32>, tensor<f32>, tensor<8x101xf32>, tensor<f32>, tensor<f32>, tensor<1x8x8xf32>) {
  %l0 = smp.matmul %h, %w96 {transpose_rhs = true} : (tensor<8x16xf32>, tensor<96x16xf32>) -> tensor<8x96xf32>
  %c0 = smp.cross_entropy %l0, %y : (tensor<8x96xf32>, tensor<8xi64>) -> tensor<f32>
  %l1 = smp.matmul %h, %w {transpose_rhs = true} : (tensor<8x16xf32>, tensor<101x16xf32>) -> tensor<8x101xf32>
  %c1 = smp.cross_entropy %l1, %y : (tensor<8x101xf32>, tensor<8xi64>) -> tensor<f32>
  %l2 = smp.matmul %hb, %w {transpose_rhs = true} : (tensor<2x8x16xf32>, tensor<101x16xf32>) -> tensor<2x8x101xf32>
  %c2 = smp.cross_entropy %l2, %yb : (tensor<2x8x101xf32>, tensor<2x8xi64>) -> tensor<f32>
  %s2 = smp.softmax %l2 {axis = -1 : i64} : tensor<2x8x101xf32>
  %l3 = smp.matmul %h, %v {transpose_rhs = true} : (tensor<8x16xf32>, tensor<101x16xf32>) -> tensor<8x101xf32>
  %c3 = smp.cross_entropy %l3, %y : (tensor<8x101xf32>, tensor<8xi64>) -> tensor<f32>
  %g3 = smp.cross_entropy_grad %l3, %y, %seed : (tensor<8x101xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x101xf32>
  %e3 = smp.exp %g3 : tensor<8x101xf32>
  %l5 = smp.matmul %hb, %wb : (tensor<2x8x16xf32>, tensor<2x16x101xf32>) -> tensor<2x8x101xf32>
  %c5 = smp.cross_entropy %l5, %yb : (tensor<2x8x101xf32>, tensor<2x8xi64>) -> tensor<f32>
  %l6 = smp.matmul %h, %v {transpose_rhs = true} : (tensor<8x16xf32>, tensor<101x16xf32>) -> tensor<8x101xf32>
  %c6 = smp.cross_entropy %l6, %y : (tensor<8x101xf32>, tensor<8xi64>) -> tensor<f32>
  %g6 = smp.cross_entropy_grad %l6, %y, %seed : (tensor<8x101xf32>, tensor<8xi64>, tensor<f32>) -> tensor<8x101xf32>
  %r6 = smp.reshape %g6 : tensor<8x101xf32> -> tensor<1x8x101xf32>
  %gg = smp.matmul %g6, %r6 {transpose_rhs = true} : (tensor<8x101xf32>, tensor<1x8x101xf32>) -> tensor<1x8x8xf32>
  return %c0, %c1, %l1, %c2, %s2, %c3, %e3, %c5, %c6, %gg : tensor<f32>, tensor<f32>, tensor<8x101xf32>, tensor<f32>, tensor<2x8x101xf32>, tensor<f32>, tensor<8x101xf32>, tensor<f32>, tensor<f32>, tensor<1x8x8xf32>
}

// -----

// An evaluation's label ranks (--eval-accuracy) read the padded logits:
// their classes attribute names the first 101 columns already.
// CHECK-LABEL: func.func @rank_reader
// CHECK: %[[L:.*]] = smp.matmul %arg0, %{{.*}} {transpose_rhs = true} : (tensor<4x32x64xbf16>, tensor<104x64xbf16>) -> tensor<4x32x104xbf16>
// CHECK: smp.cross_entropy %[[L]], %arg2 {classes = 101 : i64}
// CHECK: smp.label_rank %[[L]], %arg2, %arg3 {classes = 101 : i64} : (tensor<4x32x104xbf16>, tensor<4x32xi64>, tensor<i64>) -> tensor<4x32xf32>
func.func @rank_reader(%h: tensor<4x32x64xbf16>, %w: tensor<101x64xbf16>, %y: tensor<4x32xi64>, %o: tensor<i64>) -> (tensor<f32>, tensor<4x32xf32>) {
  %l = smp.matmul %h, %w {transpose_rhs = true} : (tensor<4x32x64xbf16>, tensor<101x64xbf16>) -> tensor<4x32x101xbf16>
  %loss = smp.cross_entropy %l, %y : (tensor<4x32x101xbf16>, tensor<4x32xi64>) -> tensor<f32>
  %r = smp.label_rank %l, %y, %o {classes = 101 : i64} : (tensor<4x32x101xbf16>, tensor<4x32xi64>, tensor<i64>) -> tensor<4x32xf32>
  return %loss, %r : tensor<f32>, tensor<4x32xf32>
}
