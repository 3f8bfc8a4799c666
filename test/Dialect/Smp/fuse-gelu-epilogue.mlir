// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-gelu-epilogue{backward=true}))' | FileCheck %s
// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-fuse-gelu-epilogue))' | FileCheck %s --check-prefix=FWD
// The pass: lib/Dialect/Smp/Transforms/FuseGeluEpilogue.cpp. By default
// (FWD) only the forward GELUs move; with backward (smpc --dgelu-epilogue)
// their gradients too.

// GPT-2's MLP in bf16, forward and backward: the GELU moves into its
// product (matmul_bias_gelu at the product, annotations kept), whose
// preactivation the backward reads; the backward's GELU gradient and bias
// sum move into the product making the GELU's output gradient
// (matmul_gelu_grad at the gradient, after the preactivation); by default
// the backward stays a product and bias_gelu_grad, which reads the fused
// op's preactivation.
// FWD-LABEL: func.func @mlp
// FWD: %[[Y:.*]], %[[P:.*]] = smp.matmul_bias_gelu %arg0, %arg1, %arg2
// FWD-NOT: smp.gelu
// FWD: %[[D:.*]] = smp.matmul %arg5, %arg3 {smp.stage = 1 : i64}
// FWD: %[[DX:.*]], %[[DB:.*]] = smp.bias_gelu_grad %[[P]], %[[D]]
// FWD-NOT: smp.matmul_gelu_grad
// FWD: return %{{.*}}, %[[DX]], %[[DB]]
// CHECK-LABEL: func.func @mlp
// CHECK: %[[Y:.*]], %[[P:.*]] = smp.matmul_bias_gelu %arg0, %arg1, %arg2 {smp.stage = 1 : i64, transpose_rhs = true} : (tensor<2x16x64xbf16>, tensor<256x64xbf16>, tensor<256xbf16>) -> (tensor<2x16x256xbf16>, tensor<2x16x256xbf16>)
// CHECK-NOT: smp.gelu
// CHECK: %[[O:.*]] = smp.matmul_bias %[[Y]], %arg3, %arg4
// CHECK: %[[DX:.*]], %[[DB:.*]] = smp.matmul_gelu_grad %arg5, %arg3, %[[P]] {smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<64x256xbf16>, tensor<2x16x256xbf16>) -> (tensor<2x16x256xbf16>, tensor<1x1x256xbf16>)
// CHECK-NOT: smp.bias_gelu_grad
// CHECK-NOT: smp.matmul %
// CHECK: return %[[O]], %[[DX]], %[[DB]]
func.func @mlp(%x: tensor<2x16x64xbf16>, %w1: tensor<256x64xbf16>, %b1: tensor<256xbf16>, %w2: tensor<64x256xbf16>, %b2: tensor<64xbf16>, %dy: tensor<2x16x64xbf16>) -> (tensor<2x16x64xbf16>, tensor<2x16x256xbf16>, tensor<1x1x256xbf16>) {
  %h = smp.matmul_bias %x, %w1, %b1 {transpose_rhs = true, smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<256x64xbf16>, tensor<256xbf16>) -> tensor<2x16x256xbf16>
  %g = smp.gelu %h {approximate = #smp<gelu_approximation tanh>, smp.stage = 1 : i64} : tensor<2x16x256xbf16>
  %o = smp.matmul_bias %g, %w2, %b2 {transpose_rhs = true} : (tensor<2x16x256xbf16>, tensor<64x256xbf16>, tensor<64xbf16>) -> tensor<2x16x64xbf16>
  %dg = smp.matmul %dy, %w2 {smp.stage = 1 : i64} : (tensor<2x16x64xbf16>, tensor<64x256xbf16>) -> tensor<2x16x256xbf16>
  %dh, %db = smp.bias_gelu_grad %h, %dg {approximate = #smp<gelu_approximation tanh>, smp.stage = 1 : i64} : tensor<2x16x256xbf16> -> tensor<1x1x256xbf16>
  return %o, %dh, %db : tensor<2x16x64xbf16>, tensor<2x16x256xbf16>, tensor<1x1x256xbf16>
}

// -----

// f16 with a [N] bias gradient and a transposed lhs; the forward GELU read
// twice (both readers take the fused result).
// CHECK-LABEL: func.func @f16
// FWD-LABEL: func.func @f16
// FWD: %[[Y:.*]], %[[P:.*]] = smp.matmul_bias_gelu %arg0, %arg1, %arg2
// FWD: %[[D:.*]] = smp.matmul %arg3, %arg1 {transpose_lhs = true}
// FWD: smp.bias_gelu_grad %[[P]], %[[D]]
// FWD: return %[[Y]], %[[Y]]
// CHECK: %[[Y:.*]], %[[P:.*]] = smp.matmul_bias_gelu %arg0, %arg1, %arg2 : (tensor<8x16xf16>, tensor<16x24xf16>, tensor<24xf16>) -> (tensor<8x24xf16>, tensor<8x24xf16>)
// CHECK: smp.matmul_gelu_grad %arg3, %arg1, %[[P]] {transpose_lhs = true} : (tensor<16x8xf16>, tensor<16x24xf16>, tensor<8x24xf16>) -> (tensor<8x24xf16>, tensor<24xf16>)
// CHECK: return %[[Y]], %[[Y]]
func.func @f16(%x: tensor<8x16xf16>, %w: tensor<16x24xf16>, %b: tensor<24xf16>, %g: tensor<16x8xf16>) -> (tensor<8x24xf16>, tensor<8x24xf16>, tensor<8x24xf16>, tensor<24xf16>) {
  %h = smp.matmul_bias %x, %w, %b : (tensor<8x16xf16>, tensor<16x24xf16>, tensor<24xf16>) -> tensor<8x24xf16>
  %y1 = smp.gelu %h {approximate = #smp<gelu_approximation tanh>} : tensor<8x24xf16>
  %y2 = smp.gelu %h {approximate = #smp<gelu_approximation tanh>} : tensor<8x24xf16>
  %d = smp.matmul %g, %w {transpose_lhs = true} : (tensor<16x8xf16>, tensor<16x24xf16>) -> tensor<8x24xf16>
  %dx, %db = smp.bias_gelu_grad %h, %d {approximate = #smp<gelu_approximation tanh>} : tensor<8x24xf16> -> tensor<24xf16>
  return %y1, %y2, %dx, %db : tensor<8x24xf16>, tensor<8x24xf16>, tensor<8x24xf16>, tensor<24xf16>
}

// -----

// What stays: f32 (the kernels whose bits the CPU reproduces), the erf
// GELU (cuBLASLt's is the tanh form), a GELU with other annotations than
// its product (another stage or micro-batch), a GELU of a product without
// bias, a gradient whose product has another reader, and a gradient with
// other annotations than its product.
// CHECK-LABEL: func.func @not_fused
// FWD-LABEL: func.func @not_fused
// FWD-NOT: smp.matmul_bias_gelu
// FWD-COUNT-4: smp.gelu %
// FWD-COUNT-4: smp.bias_gelu_grad
// CHECK-NOT: smp.matmul_bias_gelu
// CHECK-NOT: smp.matmul_gelu_grad
// CHECK-COUNT-4: smp.gelu %
// CHECK-COUNT-4: smp.bias_gelu_grad
func.func @not_fused(%x: tensor<8x16xf32>, %w: tensor<16x24xf32>, %b: tensor<24xf32>, %xh: tensor<8x16xbf16>, %wh: tensor<16x24xbf16>, %bh: tensor<24xbf16>, %gh: tensor<8x16xbf16>, %wt: tensor<24x16xbf16>) -> (tensor<8x24xf32>, tensor<8x24xbf16>, tensor<8x24xbf16>, tensor<8x24xbf16>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x24xbf16>, tensor<24xbf16>, tensor<8x24xbf16>, tensor<8x24xbf16>, tensor<24xbf16>, tensor<8x24xbf16>, tensor<24xbf16>) {
  %h0 = smp.matmul_bias %x, %w, %b : (tensor<8x16xf32>, tensor<16x24xf32>, tensor<24xf32>) -> tensor<8x24xf32>
  %y0 = smp.gelu %h0 {approximate = #smp<gelu_approximation tanh>} : tensor<8x24xf32>
  %h1 = smp.matmul_bias %xh, %wh, %bh : (tensor<8x16xbf16>, tensor<16x24xbf16>, tensor<24xbf16>) -> tensor<8x24xbf16>
  %y1 = smp.gelu %h1 : tensor<8x24xbf16>
  %h2 = smp.matmul_bias %xh, %wh, %bh : (tensor<8x16xbf16>, tensor<16x24xbf16>, tensor<24xbf16>) -> tensor<8x24xbf16>
  %y2 = smp.gelu %h2 {approximate = #smp<gelu_approximation tanh>, smp.mb = 1 : i64} : tensor<8x24xbf16>
  %h3 = smp.matmul %xh, %wh : (tensor<8x16xbf16>, tensor<16x24xbf16>) -> tensor<8x24xbf16>
  %y3 = smp.gelu %h3 {approximate = #smp<gelu_approximation tanh>} : tensor<8x24xbf16>
  %d0 = smp.matmul %x, %w : (tensor<8x16xf32>, tensor<16x24xf32>) -> tensor<8x24xf32>
  %dx0, %db0 = smp.bias_gelu_grad %h0, %d0 {approximate = #smp<gelu_approximation tanh>} : tensor<8x24xf32> -> tensor<24xf32>
  %d1 = smp.matmul %gh, %wh : (tensor<8x16xbf16>, tensor<16x24xbf16>) -> tensor<8x24xbf16>
  %dx1, %db1 = smp.bias_gelu_grad %h1, %d1 : tensor<8x24xbf16> -> tensor<24xbf16>
  %d2 = smp.matmul %gh, %wt {transpose_rhs = true} : (tensor<8x16xbf16>, tensor<24x16xbf16>) -> tensor<8x24xbf16>
  %dx2, %db2 = smp.bias_gelu_grad %h1, %d2 {approximate = #smp<gelu_approximation tanh>} : tensor<8x24xbf16> -> tensor<24xbf16>
  %d3 = smp.matmul %gh, %wh {smp.mb = 2 : i64} : (tensor<8x16xbf16>, tensor<16x24xbf16>) -> tensor<8x24xbf16>
  %dx3, %db3 = smp.bias_gelu_grad %h1, %d3 {approximate = #smp<gelu_approximation tanh>} : tensor<8x24xbf16> -> tensor<24xbf16>
  return %y0, %y1, %y2, %y3, %dx0, %db0, %dx1, %db1, %d2, %dx2, %db2, %dx3, %db3 : tensor<8x24xf32>, tensor<8x24xbf16>, tensor<8x24xbf16>, tensor<8x24xbf16>, tensor<8x24xf32>, tensor<24xf32>, tensor<8x24xbf16>, tensor<24xbf16>, tensor<8x24xbf16>, tensor<8x24xbf16>, tensor<24xbf16>, tensor<8x24xbf16>, tensor<24xbf16>
}
