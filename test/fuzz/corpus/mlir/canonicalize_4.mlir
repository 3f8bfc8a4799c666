

func.func @identities(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = smp.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = smp.transpose %0 {perm = array<i64: 0, 1>} : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = smp.slice %1 {starts = array<i64: 0, 0>, limits = array<i64: 2, 3>, steps = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = smp.cast %2 : tensor<2x3xf32> to tensor<2x3xf32>
  %4 = smp.concat %3 {axis = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %4 : tensor<2x3xf32>
}
