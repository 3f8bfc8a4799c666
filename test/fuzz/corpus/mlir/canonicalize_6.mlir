

func.func @mask() -> tensor<3x3xf32> {
  %ones = smp.constant dense<1.0> : tensor<3x3xf32>
  %tril = smp.trilu %ones {upper = false, k = 0 : i64} : tensor<3x3xf32>
  %zero = smp.constant dense<0.0> : tensor<f32>
  %keep = smp.greater %tril, %zero : (tensor<3x3xf32>, tensor<f32>) -> tensor<3x3xi1>
  %neg = smp.constant dense<-1.0e4> : tensor<f32>
  %r = smp.where %keep, %zero, %neg : (tensor<3x3xi1>, tensor<f32>, tensor<f32>) -> tensor<3x3xf32>
  return %r : tensor<3x3xf32>
}
