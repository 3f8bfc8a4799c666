// max/min's gradient goes to the winner; a tie splits it in half (as
// torch.maximum), or with `strict` gives none (a Clip bound: nn.ReLU6 and
// nn.Hardtanh pass no gradient at their bounds).
// RUN: smp-opt %s -split-input-file '--smp-build-gradients=loss=mse:y:target' | FileCheck %s

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4xf32> {smp.param = "x"}
// CHECK: %[[TIE:.*]] = smp.equal %[[X]], %[[C:[^ ]*]]
// CHECK: %[[HALF:.*]] = smp.where %[[TIE]], %{{.*}}, %{{.*}}
// CHECK: %[[WINS:.*]] = smp.greater %[[X]], %[[C]]
// CHECK: smp.where %[[WINS]], %{{.*}}, %[[HALF]]
func.func @main(%x: tensor<4xf32> {smp.param = "x"})
    -> (tensor<4xf32> {smp.output = "y"}) {
  %c = smp.constant dense<0.0> : tensor<f32>
  %y = smp.max %x, %c : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4xf32> {smp.param = "x"}
// CHECK-NOT: smp.equal
// CHECK: %[[WINS:.*]] = smp.less %[[X]], %[[C:[^ ]*]]
// CHECK-NOT: smp.equal
// CHECK: smp.where %[[WINS]], %{{.*}}, %[[ZERO:[^ ]*]]
func.func @main(%x: tensor<4xf32> {smp.param = "x"})
    -> (tensor<4xf32> {smp.output = "y"}) {
  %c = smp.constant dense<6.0> : tensor<f32>
  %y = smp.min %x, %c {strict} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
