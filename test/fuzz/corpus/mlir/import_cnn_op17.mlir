module @main_graph attributes {smp.opset = 17 : i64, smp.source = "/work/wt-fuzz/test/fixtures/cnn_op17.onnx"} {
  func.func @main(%arg0: tensor<2x1x12x12xf32> {smp.input = "x"}, %arg1: tensor<8x4x3x3xf32> {smp.param = "features.4.weight"}, %arg2: tensor<8xf32> {smp.param = "features.4.bias"}, %arg3: tensor<10x8xf32> {smp.param = "fc.weight"}, %arg4: tensor<10xf32> {smp.param = "fc.bias"}, %arg5: tensor<4x1x3x3xf32> {smp.param = "onnx::Conv_23"}, %arg6: tensor<4xf32> {smp.param = "onnx::Conv_24"}) -> (tensor<2x10xf32> {smp.output = "logits"}) {
    %0 = smp.conv %arg0, %arg5, %arg6 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x1x12x12xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>) -> tensor<2x4x12x12xf32>
    %1 = smp.relu %0 : tensor<2x4x12x12xf32>
    %2 = smp.max_pool %1 {dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<2x4x12x12xf32> -> tensor<2x4x6x6xf32>
    %3 = smp.conv %2, %arg1, %arg2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<2x4x6x6xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>) -> tensor<2x8x4x4xf32>
    %4 = smp.relu %3 : tensor<2x8x4x4xf32>
    %5 = smp.avg_pool %4 {count_include_pad = true, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<2x8x4x4xf32> -> tensor<2x8x2x2xf32>
    %6 = smp.reduce_mean %5 {axes = array<i64: 2, 3>} : tensor<2x8x2x2xf32> -> tensor<2x8x1x1xf32>
    %7 = smp.reshape %6 : tensor<2x8x1x1xf32> -> tensor<2x8xf32>
    %8 = smp.matmul %7, %arg3 {transpose_rhs = true} : (tensor<2x8xf32>, tensor<10x8xf32>) -> tensor<2x10xf32>
    %9 = smp.add %8, %arg4 : (tensor<2x10xf32>, tensor<10xf32>) -> tensor<2x10xf32>
    return %9 : tensor<2x10xf32>
  }
}
