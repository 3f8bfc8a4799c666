
func.func @main(%x: tensor<4x3xf32> {smp.input = "x"},
                %w: tensor<5x3xf32> {smp.param = "w"},
                %b: tensor<5xf32> {smp.param = "b"},
                %m: tensor<4xi64> {smp.param = "mask_table", smp.frozen})
    -> (tensor<4x5xf32> {smp.output = "logits"}) {
  %0 = smp.matmul %x, %w {transpose_rhs = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %1 = smp.add %0, %b : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  return %1 : tensor<4x5xf32>
}
