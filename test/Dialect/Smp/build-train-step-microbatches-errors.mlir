// RUN: not smp-opt %s -split-input-file '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' 2>&1 | FileCheck %s --check-prefix=SCALAR
// RUN: not smp-opt %s -split-input-file '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=0' 2>&1 | FileCheck %s --check-prefix=ZERO

// ZERO: error: microbatches must be >= 1, got 0{{$}}
func.func @main(%x: tensor<2x4xf32> {smp.input = "x"},
                %w1: tensor<4x4xf32> {smp.param = "w1"},
                %w2: tensor<4x4xf32> {smp.param = "w2"})
    -> (tensor<2x4xf32> {smp.output = "logits"}) {
  %h = smp.matmul %x, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("l1")
  %r = smp.add %x, %h : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("l1.res")
  %out = smp.matmul %r, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("l2")
  return %out : tensor<2x4xf32>
}

// -----

// A scalar input cannot be sliced into micro-batches.
// SCALAR: error: input #1 is a scalar: it cannot be split into micro-batches
func.func @main(%x: tensor<2x4xf32> {smp.input = "x"},
                %t: tensor<f32> {smp.input = "temperature"},
                %w: tensor<4x4xf32> {smp.param = "w"})
    -> (tensor<2x4xf32> {smp.output = "logits"}) {
  %0 = smp.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = smp.mul %0, %t : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}
