

func.func @big_splat() -> tensor<1024x1024xi1> {
  %z = smp.constant dense<0.0> : tensor<1x1xf32>
  %e = smp.expand %z : tensor<1x1xf32> -> tensor<1024x1024xf32>
  %zero = smp.constant dense<0.0> : tensor<f32>
  %eq = smp.equal %e, %zero : (tensor<1024x1024xf32>, tensor<f32>) -> tensor<1024x1024xi1>
  return %eq : tensor<1024x1024xi1>
}
