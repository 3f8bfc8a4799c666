

func.func @rms_norm_rsqrt(%x: tensor<4x8xf32>, %w: tensor<8xf32>) -> tensor<4x8xf32> {
  %sq = smp.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %ms = smp.reduce_mean %sq {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4x1xf32>
  %eps = smp.constant dense<1.0e-6> : tensor<f32>
  %a = smp.add %eps, %ms : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %inv = smp.rsqrt %a : tensor<4x1xf32>
  %n = smp.mul %inv, %x : (tensor<4x1xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = smp.mul %n, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
