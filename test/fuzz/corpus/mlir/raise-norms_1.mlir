

func.func @rms_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %two = smp.constant dense<2.0> : tensor<f32>
  %sq = smp.pow %x, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %ms = smp.reduce_mean %sq {axes = array<i64: -1>} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %eps = smp.constant dense<1.0e-6> : tensor<f32>
  %a = smp.add %ms, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %s = smp.sqrt %a : tensor<2x4x1xf32>
  %one = smp.constant dense<1.0> : tensor<f32>
  %inv = smp.div %one, %s : (tensor<f32>, tensor<2x4x1xf32>) -> tensor<2x4x1xf32>
  %n = smp.mul %x, %inv : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %y = smp.mul %w, %n : (tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return %y : tensor<2x4x8xf32>
}
