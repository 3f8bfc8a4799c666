

func.func @big_non_splat() -> tensor<512x512xf32> {
  %one = smp.constant dense<1.0> : tensor<512x512xf32>
  %t = smp.trilu %one {upper = false, k = 0 : i64} : tensor<512x512xf32>
  return %t : tensor<512x512xf32>
}
