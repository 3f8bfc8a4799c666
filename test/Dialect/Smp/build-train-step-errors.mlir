// RUN: smp-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=sgd})'
// RUN: not smp-opt %s -split-input-file -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=lion})' 2>&1 | FileCheck %s --check-prefix=OPT
// OPT: unknown optimizer 'lion' (expected sgd, adam or adamw)

// expected-error @+1 {{loss output 'y' must be a float scalar, got 'tensor<2x3xf32>'}}
func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}) -> (tensor<2x3xf32> {smp.output = "y"}) {
  return %x : tensor<2x3xf32>
}

// -----

// An op without a gradient between a parameter and the loss (a backward op:
// smp has no second-order gradients).
func.func @main(%x: tensor<4xf32> {smp.input = "x"}, %w: tensor<4xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "y"}) {
  // expected-error @+1 {{'smp.gelu_grad' op has no gradient (autodiff cannot go through it); freeze the parameters that reach it}}
  %0 = smp.gelu_grad %x, %w : tensor<4xf32>
  %1 = smp.reduce_sum %0 {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
