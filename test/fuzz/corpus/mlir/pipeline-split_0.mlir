





func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                %mask: tensor<4x8xi64> {smp.input = "mask"},
                %e: tensor<8x8xf32> {smp.param = "e"},
                %w1: tensor<8x8xf32> {smp.param = "w1"},
                %w2: tensor<8x8xf32> {smp.param = "w2"},
                %w3: tensor<8x8xf32> {smp.param = "w3"})
    -> (tensor<4x8xf32> {smp.output = "logits"}) {
  %half = smp.constant dense<0.5> : tensor<f32> loc("half")
  %m = smp.cast %mask : tensor<4x8xi64> to tensor<4x8xf32> loc("mask_cast")
  %et = smp.transpose %e {perm = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32> loc("e_t")
  %es = smp.mul %et, %half : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32> loc("e_scaled")
  %h0 = smp.matmul %x, %es : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("embed")
  %a0 = smp.add %h0, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("embed_mask")
  %t1 = smp.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("l1.mm")
  %r1 = smp.add %a0, %t1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("l1.res")
  %t2 = smp.matmul %r1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("l2.mm")
  %r2 = smp.add %r1, %t2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("l2.res")
  %t3 = smp.matmul %r2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("l3.mm")
  %r3 = smp.add %r2, %t3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("l3.res")
  %out = smp.matmul %r3, %es {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("head")
  return %out : tensor<4x8xf32>
}