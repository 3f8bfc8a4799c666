

func.func @matmul_transposed_operands(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %v: tensor<8x16xf32>, %y: tensor<2x8x4xf32>, %u: tensor<4x16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8x2x16xf32>) {
  %wt = smp.transpose %w {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %a = smp.matmul %x, %wt : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %vt = smp.transpose %v {perm = array<i64: 1, 0>} : tensor<8x16xf32> -> tensor<16x8xf32>
  %b = smp.matmul %x, %vt {transpose_rhs = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %yt = smp.transpose %y {perm = array<i64: 0, 2, 1>} : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
  %c = smp.matmul %yt, %v : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %p = smp.transpose %y {perm = array<i64: 1, 0, 2>} : tensor<2x8x4xf32> -> tensor<8x2x4xf32>
  %d = smp.matmul %p, %u : (tensor<8x2x4xf32>, tensor<4x16xf32>) -> tensor<8x2x16xf32>
  return %a, %b, %c, %d : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<8x2x16xf32>
}