

func.func @casts() -> (tensor<3xi64>, tensor<3xi1>) {
  %f = smp.constant dense<[-1.7, 2.9, 0.0]> : tensor<3xf32>
  %i = smp.cast %f : tensor<3xf32> to tensor<3xi64>
  %b = smp.cast %f : tensor<3xf32> to tensor<3xi1>
  return %i, %b : tensor<3xi64>, tensor<3xi1>
}
