

func.func @div_zero() -> tensor<i64> {
  %a = smp.constant dense<4> : tensor<i64>
  %z = smp.constant dense<0> : tensor<i64>
  %r = smp.div %a, %z : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %r : tensor<i64>
}
