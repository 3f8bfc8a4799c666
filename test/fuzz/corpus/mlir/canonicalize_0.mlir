
func.func @shape_math() -> tensor<4xi64> {
  %shape = smp.constant dense<[2, 16, 32]> : tensor<3xi64>
  %i0 = smp.constant dense<[0]> : tensor<1xi64>
  %i1 = smp.constant dense<[1]> : tensor<1xi64>
  %b = smp.gather %shape, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %t = smp.gather %shape, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<1xi64>) -> tensor<1xi64>
  %heads = smp.constant dense<[4]> : tensor<1xi64>
  %c = smp.constant dense<[32]> : tensor<1xi64>
  %hd = smp.div %c, %heads : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %r = smp.concat %b, %heads, %t, %hd {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<4xi64>
  return %r : tensor<4xi64>
}
