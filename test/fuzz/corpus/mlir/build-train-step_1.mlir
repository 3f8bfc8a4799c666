

func.func @main(%x: tensor<2x3xf32> {smp.input = "x"},
                %w: tensor<3x4xf32> {smp.param = "w"},
                %u: tensor<4xf32> {smp.param = "unused"})
    -> (tensor<2x4xf32> {smp.output = "logits"}, tensor<4xf32> {smp.output = "u"}) {
  %0 = smp.matmul %x, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0, %u : tensor<2x4xf32>, tensor<4xf32>
}
