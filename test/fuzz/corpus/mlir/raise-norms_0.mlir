
func.func @layer_norm(%x: tensor<2x4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<2x4x8xf32> {
  %mean = smp.reduce_mean %x {axes = array<i64: -1>} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %d = smp.sub %x, %mean : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %two = smp.constant dense<2.0> : tensor<f32>
  %sq = smp.pow %d, %two : (tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
  %var = smp.reduce_mean %sq {axes = array<i64: -1>} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %eps = smp.constant dense<1.0e-5> : tensor<f32>
  %ve = smp.add %var, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %std = smp.sqrt %ve : tensor<2x4x1xf32>
  %n = smp.div %d, %std : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %y = smp.mul %n, %w : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %z = smp.add %y, %b : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}
