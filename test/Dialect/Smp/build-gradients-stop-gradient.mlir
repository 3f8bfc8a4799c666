// PyTorch's `.detach()` reaches smp as a cast to the same type marked
// smp.no_grad (the ONNX importer, lib/Frontend/ONNX/DetachedValues.cpp):
// autodiff treats its result as a constant, and smp-build-gradients removes
// the cast once the gradients are built (from @train_step and @main).
// RUN: smp-opt %s '--smp-build-gradients=loss=mse:y:target' | FileCheck %s

// y = w * x + stop(w * x) (a straight-through estimator's shape): the
// gradient of w is x * dy only, from the first term.
// CHECK-LABEL: func.func @main
// CHECK-NOT: smp.no_grad
// CHECK: return
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<4xf32> {smp.param = "w"}
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<4xf32> {smp.input = "x"}
// CHECK: %[[WX:.*]] = smp.mul %[[W]], %[[X]]
// CHECK-NOT: smp.cast
// CHECK: %[[Y:.*]] = smp.add %[[WX]], %[[WX]]
// CHECK-NOT: smp.no_grad
// The loss's gradient dy (the mse's two products summed) reaches w once:
// multiplied by x, not summed with the stopped term's first.
// CHECK: %[[DY:.*]] = smp.add %{{.*}}, %{{.*}} {smp.bwd}
// CHECK-NEXT: %[[GW:.*]] = smp.mul %[[DY]], %[[X]] {smp.bwd}
// CHECK-NEXT: return %[[GW]]
func.func @main(%w: tensor<4xf32> {smp.param = "w"},
                %x: tensor<4xf32> {smp.input = "x"})
    -> (tensor<4xf32> {smp.output = "y"}) {
  %wx = smp.mul %w, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = smp.cast %wx {smp.no_grad} : tensor<4xf32> to tensor<4xf32>
  %y = smp.add %wx, %s : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
