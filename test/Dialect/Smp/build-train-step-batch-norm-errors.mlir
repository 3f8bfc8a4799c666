// RUN: smp-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=sgd})'
// RUN: not smp-opt %s -split-input-file -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=sgd bn-stats=sync})' 2>&1 | FileCheck %s --check-prefix=STATS
// STATS: unknown bn-stats 'sync' (expected global, replica or running)

// One value per channel (batch 1, no spatial dims): PyTorch refuses to train
// this too.
func.func @main(%x: tensor<1x3xf32> {smp.input = "x"}, %s: tensor<3xf32> {smp.param = "s"},
                %b: tensor<3xf32> {smp.param = "b"}, %m: tensor<3xf32> {smp.param = "m"},
                %v: tensor<3xf32> {smp.param = "v"}) -> (tensor<f32> {smp.output = "y"}) {
  // expected-error @+1 {{batch norm sees 1 value per channel in a training step (input 'tensor<1x3xf32>'): batch statistics need more than one (PyTorch refuses this too); train with a larger batch}}
  %0 = smp.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f32} : (tensor<1x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3xf32>
  %1 = smp.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<1x3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// Running statistics that are constants cannot be updated.
func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %s: tensor<3xf32> {smp.param = "s"},
                %b: tensor<3xf32> {smp.param = "b"}, %v: tensor<3xf32> {smp.param = "v"}) -> (tensor<f32> {smp.output = "y"}) {
  %m = smp.constant dense<0.0> : tensor<3xf32>
  // expected-error @+1 {{batch norm: the running mean is not a parameter of the file (a constant or a computed value), so training cannot update it as PyTorch's train() does; export the model with its BatchNorm buffers as initializers}}
  %0 = smp.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = smp.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}

// -----

// A running statistic that is also the bias (an exporter merged equal
// tensors): updating it would change the bias.
func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %s: tensor<3xf32> {smp.param = "s"},
                %z: tensor<3xf32> {smp.param = "zeros"}, %v: tensor<3xf32> {smp.param = "v"}) -> (tensor<f32> {smp.output = "y"}) {
  // expected-error @+1 {{batch norm: its running statistic 'zeros' is also read elsewhere (the exporter merged equal tensors); training updates it, so it must be this batch norm's own: re-export with torch.onnx.export(..., dynamo=True, optimize=False)}}
  %0 = smp.batch_norm %x, %s, %z, %z, %v {epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = smp.reduce_sum %0 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %1 : tensor<f32>
}
