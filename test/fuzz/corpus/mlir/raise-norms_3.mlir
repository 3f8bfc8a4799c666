

func.func @not_a_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %two = smp.constant dense<2.0> : tensor<f32>
  %sq = smp.pow %x, %two : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %ms = smp.reduce_mean %sq {axes = array<i64: 0>} : tensor<4x8xf32> -> tensor<1x8xf32>
  %eps = smp.constant dense<1.0e-6> : tensor<f32>
  %a = smp.add %ms, %eps : (tensor<1x8xf32>, tensor<f32>) -> tensor<1x8xf32>
  %inv = smp.rsqrt %a : tensor<1x8xf32>
  %n = smp.mul %x, %inv : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %y = smp.mul %n, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y, %n : tensor<4x8xf32>, tensor<4x8xf32>
}