// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=mse:y:target optimizer=sgd})' | FileCheck %s

// --loss mse:OUTPUT:TARGET: a new input TARGET of the output's type and the
// mean of the squared difference over every element.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[Y:[^:]*]]: tensor<4x2xf32> {smp.input = "target"}
// CHECK: %[[OUT:.*]] = smp.matmul
// CHECK: %[[D:.*]] = smp.sub %[[OUT]], %[[Y]] : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK: %[[SQ:.*]] = smp.mul %[[D]], %[[D]]
// CHECK: %[[L:.*]] = smp.reduce_mean %[[SQ]] {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
// CHECK: return {{.*}}, %[[L]], %{{.*}} :
func.func @main(%x: tensor<4x3xf32> {smp.input = "x"},
                %w: tensor<3x2xf32> {smp.param = "w"})
    -> (tensor<4x2xf32> {smp.output = "y"}) {
  %0 = smp.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}
