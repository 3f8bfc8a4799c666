// RUN: smp-opt %s | smp-opt | FileCheck %s
// Every smp op parses, verifies, prints and re-parses.

// CHECK-LABEL: func.func @elementwise
// CHECK-SAME: {smp.input = "x"}
// CHECK-SAME: {smp.param = "w"}
// CHECK-SAME: {smp.output = "y"}
func.func @elementwise(%x: tensor<2x3xf32> {smp.input = "x"},
                       %w: tensor<3xf32> {smp.param = "w"},
                       %i: tensor<2x3xi64> {smp.input = "i"},
                       %b: tensor<2x3xi1> {smp.input = "b"})
    -> (tensor<2x3xf32> {smp.output = "y"}) {
  // CHECK: smp.add %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %0 = smp.add %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = smp.sub %0, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = smp.mul %1, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = smp.div %2, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = smp.pow %3, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = smp.max %4, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %6 = smp.min %5, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: smp.equal {{.*}} -> tensor<2x3xi1>
  %7 = smp.equal %i, %i : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi1>
  %8 = smp.less %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
  %9 = smp.greater %x, %w : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %10 = smp.and %7, %8 : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %11 = smp.or %10, %9 : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  %12 = smp.not %11 : tensor<2x3xi1>
  // CHECK: smp.where
  %13 = smp.where %12, %6, %x : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %14 = smp.neg %13 : tensor<2x3xf32>
  %15 = smp.abs %14 : tensor<2x3xf32>
  %16 = smp.exp %15 : tensor<2x3xf32>
  %17 = smp.log %16 : tensor<2x3xf32>
  %18 = smp.sqrt %17 : tensor<2x3xf32>
  %19 = smp.rsqrt %18 : tensor<2x3xf32>
  %20 = smp.reciprocal %19 : tensor<2x3xf32>
  %21 = smp.tanh %20 : tensor<2x3xf32>
  %22 = smp.erf %21 : tensor<2x3xf32>
  %23 = smp.sigmoid %22 : tensor<2x3xf32>
  %24 = smp.silu %23 : tensor<2x3xf32>
  %25 = smp.relu %24 : tensor<2x3xf32>
  %26 = smp.sin %25 : tensor<2x3xf32>
  %27 = smp.cos %26 : tensor<2x3xf32>
  // CHECK: smp.leaky_relu %{{.*}} {alpha = 1.000000e-01 : f32}
  %28 = smp.leaky_relu %27 {alpha = 0.1 : f32} : tensor<2x3xf32>
  // CHECK: smp.gelu %{{.*}} {approximate = #smp<gelu_approximation tanh>}
  %29 = smp.gelu %28 {approximate = #smp<gelu_approximation tanh>} : tensor<2x3xf32>
  %30 = smp.gelu %29 : tensor<2x3xf32>
  // CHECK: smp.cast %{{.*}} : tensor<2x3xf32> to tensor<2x3xbf16>
  %31 = smp.cast %30 : tensor<2x3xf32> to tensor<2x3xbf16>
  %32 = smp.cast %31 : tensor<2x3xbf16> to tensor<2x3xf32>
  return %32 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @linalg_norms
func.func @linalg_norms(%a: tensor<4x2x8xf32>, %b: tensor<16x8xf32>,
                        %s: tensor<16xf32>, %v: tensor<8xf32>)
    -> (tensor<4x2x16xf32>, tensor<4x2x1xf32>, tensor<f32>) {
  // CHECK: smp.matmul %{{.*}}, %{{.*}} {transpose_rhs = true}
  %0 = smp.matmul %a, %b {transpose_rhs = true} : (tensor<4x2x8xf32>, tensor<16x8xf32>) -> tensor<4x2x16xf32>
  %1 = smp.matmul %v, %b {transpose_rhs = true} : (tensor<8xf32>, tensor<16x8xf32>) -> tensor<16xf32>
  %2 = smp.reduce_sum %0 {axes = array<i64: 2>} : tensor<4x2x16xf32> -> tensor<4x2x1xf32>
  %3 = smp.reduce_mean %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2x16xf32> -> tensor<16xf32>
  %4 = smp.reduce_max %0 {axes = array<i64: -1>} : tensor<4x2x16xf32> -> tensor<4x2x1xf32>
  %5 = smp.softmax %0 {axis = -1 : i64} : tensor<4x2x16xf32>
  %6 = smp.log_softmax %5 {axis = 2 : i64} : tensor<4x2x16xf32>
  // CHECK: smp.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.99999974E-6 : f32}
  %7 = smp.layer_norm %6, %s, %s {axis = 2 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x2x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  %8 = smp.layer_norm %7, %s {axis = -1 : i64, epsilon = 1.0e-5 : f32} : (tensor<4x2x16xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  %9 = smp.rms_norm %8, %s {epsilon = 1.0e-6 : f32} : (tensor<4x2x16xf32>, tensor<16xf32>) -> tensor<4x2x16xf32>
  %l = smp.constant dense<1> : tensor<4x2xi64>
  // CHECK: smp.cross_entropy {{.*}} -> tensor<f32>
  %10 = smp.cross_entropy %9, %l : (tensor<4x2x16xf32>, tensor<4x2xi64>) -> tensor<f32>
  %11 = smp.cross_entropy %9, %l {ignore_index = 0 : i64, reduction = #smp<reduction none>} : (tensor<4x2x16xf32>, tensor<4x2xi64>) -> tensor<4x2xf32>
  // CHECK: smp.cross_entropy %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x2x16xf32>, tensor<4x2xi64>, tensor<16xf32>) -> tensor<f32>
  %12 = smp.cross_entropy %9, %l, %s : (tensor<4x2x16xf32>, tensor<4x2xi64>, tensor<16xf32>) -> tensor<f32>
  // CHECK: smp.label_rank %{{.*}}, %{{.*}}, %{{.*}} {classes = 16 : i64} : (tensor<4x2x16xf32>, tensor<4x2xi64>, tensor<i64>) -> tensor<4x2xf32>
  // CHECK: smp.label_rank %{{.*}}, %{{.*}}, %{{.*}} target %{{.*}} {classes = 30 : i64, ignore_index = 0 : i64} : (tensor<4x2x16xf32>, tensor<4x2xi64>, tensor<i64>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %first = smp.constant dense<0> : tensor<i64>
  %13 = smp.label_rank %9, %l, %first {classes = 16 : i64} : (tensor<4x2x16xf32>, tensor<4x2xi64>, tensor<i64>) -> tensor<4x2xf32>
  %14 = smp.label_rank %9, %l, %first target %13 {classes = 30 : i64, ignore_index = 0 : i64} : (tensor<4x2x16xf32>, tensor<4x2xi64>, tensor<i64>, tensor<4x2xf32>) -> tensor<4x2xf32>
  return %9, %2, %10 : tensor<4x2x16xf32>, tensor<4x2x1xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x3x4xf32>, %idx: tensor<5xi64>)
    -> tensor<2x5x4xf32> {
  %0 = smp.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = smp.transpose %x {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %2 = smp.expand %0 : tensor<6x4xf32> -> tensor<3x6x4xf32>
  // CHECK: smp.slice %{{.*}} {limits = array<i64: 2, 3, -1>, starts = array<i64: 0, 1, 3>, steps = array<i64: 1, 1, -2>}
  %3 = smp.slice %x {starts = array<i64: 0, 1, 3>, limits = array<i64: 2, 3, -1>, steps = array<i64: 1, 1, -2>} : tensor<2x3x4xf32> -> tensor<2x2x2xf32>
  %4 = smp.concat %x, %x {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  // CHECK: smp.split %{{.*}} {axis = 1 : i64, sizes = array<i64: 1, 5>} : tensor<2x6x4xf32> -> tensor<2x1x4xf32>, tensor<2x5x4xf32>
  %5:2 = smp.split %4 {axis = 1 : i64, sizes = array<i64: 1, 5>} : tensor<2x6x4xf32> -> tensor<2x1x4xf32>, tensor<2x5x4xf32>
  %6 = smp.gather %x, %idx {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x5x4xf32>
  %7 = smp.trilu %x {upper = false, k = 0 : i64} : tensor<2x3x4xf32>
  // CHECK: smp.tile %{{.*}} {repeats = array<i64: 2, 1, 3>} : tensor<2x3x4xf32> -> tensor<4x3x12xf32>
  %8 = smp.tile %x {repeats = array<i64: 2, 1, 3>} : tensor<2x3x4xf32> -> tensor<4x3x12xf32>
  return %6 : tensor<2x5x4xf32>
}

// CHECK-LABEL: func.func @conv_pool
func.func @conv_pool(%x: tensor<2x4x9x9xf32>, %w: tensor<8x2x3x3xf32>,
                     %bias: tensor<8xf32>, %c: tensor<8xf32>)
    -> tensor<2x8x2x2xf32> {
  // CHECK: smp.conv
  %0 = smp.conv %x, %w, %bias {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64} : (tensor<2x4x9x9xf32>, tensor<8x2x3x3xf32>, tensor<8xf32>) -> tensor<2x8x5x5xf32>
  %1 = smp.batch_norm %0, %c, %c, %c, %c {epsilon = 1.0e-5 : f32} : (tensor<2x8x5x5xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8x5x5xf32>
  %2 = smp.max_pool %1 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<2x8x5x5xf32> -> tensor<2x8x2x2xf32>
  // CHECK: smp.avg_pool %{{.*}} {ceil_mode = true
  %3 = smp.avg_pool %1 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true} : tensor<2x8x5x5xf32> -> tensor<2x8x3x3xf32>
  return %2 : tensor<2x8x2x2xf32>
}
