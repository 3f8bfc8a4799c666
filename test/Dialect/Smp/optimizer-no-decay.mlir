// smp-optimizer's no-decay option (smpc --no-decay REGEX): PyTorch's
// parameter groups. The parameters whose name matches get weight decay 0,
// the others the decay given (here 0.1); a regex that matches no trained
// parameter is refused naming them; with no decay to take away it warns.
// RUN: smp-opt %s '--smp-optimizer=optimizer=adamw weight-decay=0.1 no-decay=bias|norm' | FileCheck %s
// RUN: not smp-opt %s '--smp-optimizer=optimizer=adamw no-decay=bais' 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: smp-opt %s '--smp-optimizer=optimizer=sgd no-decay=bias' 2>&1 >/dev/null | FileCheck %s --check-prefix=ZERO
// RUN: not smp-opt %s '--smp-optimizer=optimizer=adamw no-decay=(' 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: {smp.param = "fc.weight"}
// CHECK: smp.adam_update %arg1, {{.*}} {weight_decay = 1.000000e-01 : f32}
// (weight decay 0 is the attribute's default, not printed)
// CHECK: smp.adam_update %arg2, {{[^{]*}} : tensor<2xf32>
// CHECK: smp.adam_update %arg3, {{[^{]*}} : tensor<3xf32>
// NONE: error: --no-decay 'bais' matches no trained parameter (they are: fc.weight, fc.bias, norm.weight; `smpc summary` lists them all)
// ZERO: warning: --no-decay changes nothing: the weight decay is 0 (sgd's default; pass --weight-decay X to decay the other parameters)
// BAD: bad --no-decay regex '(': parentheses not balanced
func.func @train_step(%loss: tensor<f32>,
                      %w: tensor<2x3xf32> {smp.param = "fc.weight"},
                      %b: tensor<2xf32> {smp.param = "fc.bias"},
                      %n: tensor<3xf32> {smp.param = "norm.weight"})
    -> (tensor<2x3xf32> {smp.grad_of = 1 : i64},
        tensor<2xf32> {smp.grad_of = 2 : i64},
        tensor<3xf32> {smp.grad_of = 3 : i64},
        tensor<f32> {smp.output = "loss"}) {
  return %w, %b, %n, %loss : tensor<2x3xf32>, tensor<2xf32>, tensor<3xf32>, tensor<f32>
}
