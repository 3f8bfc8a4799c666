module @main_graph attributes {smp.opset = 17 : i64, smp.source = "/work/wt-fuzz/test/fixtures/mlp_op17.onnx"} {
  func.func @main(%arg0: tensor<4x16xf32> {smp.input = "x"}, %arg1: tensor<32x16xf32> {smp.param = "net.0.weight"}, %arg2: tensor<32xf32> {smp.param = "net.0.bias"}, %arg3: tensor<32x32xf32> {smp.param = "net.2.weight"}, %arg4: tensor<32xf32> {smp.param = "net.2.bias"}, %arg5: tensor<10x32xf32> {smp.param = "net.4.weight"}, %arg6: tensor<10xf32> {smp.param = "net.4.bias"}) -> (tensor<4x10xf32> {smp.output = "logits"}) {
    %0 = smp.matmul %arg0, %arg1 {transpose_rhs = true} : (tensor<4x16xf32>, tensor<32x16xf32>) -> tensor<4x32xf32>
    %1 = smp.add %0, %arg2 : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %2 = smp.relu %1 : tensor<4x32xf32>
    %3 = smp.matmul %2, %arg3 {transpose_rhs = true} : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
    %4 = smp.add %3, %arg4 : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %5 = smp.gelu %4 : tensor<4x32xf32>
    %6 = smp.matmul %5, %arg5 {transpose_rhs = true} : (tensor<4x32xf32>, tensor<10x32xf32>) -> tensor<4x10xf32>
    %7 = smp.add %6, %arg6 : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
    return %7 : tensor<4x10xf32>
  }
}
