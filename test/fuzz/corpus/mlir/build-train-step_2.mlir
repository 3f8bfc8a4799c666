

func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
  return %x : tensor<2x3xf32>
}