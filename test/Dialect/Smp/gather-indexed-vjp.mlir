// RUN: smp-opt %s '--smp-build-train-step=loss=mse:y:target' | FileCheck %s

// The gradients of smp.gather_nd and smp.gather_elements with respect to
// their data are scatter-adds of the incoming gradient at the same indices
// (same batch_dims / axis) into zeros of the data's shape; the integer
// indices get none.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[A:.*]] = smp.gather_nd %{{.*}}, %[[I:[^ ]*]] {batch_dims = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x1xi64>) -> tensor<2x5x4xf32>
// CHECK: %[[B:.*]] = smp.gather_elements %[[A]], %[[J:[^ ]*]] {axis = 1 : i64} : (tensor<2x5x4xf32>, tensor<2x7x4xi64>) -> tensor<2x7x4xf32>
// CHECK: %[[GB:.*]] = smp.gather_elements_grad %[[J]], %{{.*}} {axis = 1 : i64} : (tensor<2x7x4xi64>, tensor<2x7x4xf32>) -> tensor<2x5x4xf32>
// CHECK: smp.gather_nd_grad %[[I]], %[[GB]] {batch_dims = 1 : i64} : (tensor<2x5x1xi64>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>

module {
  func.func @main(%i: tensor<2x5x1xi64> {smp.input = "i"},
                  %j: tensor<2x7x4xi64> {smp.input = "j"},
                  %w: tensor<2x3x4xf32> {smp.param = "w"})
      -> (tensor<2x7x4xf32> {smp.output = "y"}) {
    %a = smp.gather_nd %w, %i {batch_dims = 1 : i64}
        : (tensor<2x3x4xf32>, tensor<2x5x1xi64>) -> tensor<2x5x4xf32>
    %b = smp.gather_elements %a, %j {axis = 1 : i64}
        : (tensor<2x5x4xf32>, tensor<2x7x4xi64>) -> tensor<2x7x4xf32>
    return %b : tensor<2x7x4xf32>
  }
}
