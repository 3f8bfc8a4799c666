// RUN: not smp-opt %s -split-input-file --smp-pipeline-split=stages=2 2>&1 | FileCheck %s --check-prefix=INPUT
// RUN: not smp-opt %s -split-input-file '--smp-pipeline-split=stages=3 cuts=l1.mm,nope' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not smp-opt %s -split-input-file '--smp-pipeline-split=stages=3 cuts=l1.mm,mask_cast' 2>&1 | FileCheck %s --check-prefix=FREE
// RUN: not smp-opt %s -split-input-file '--smp-pipeline-split=stages=2 cuts=e_t' 2>&1 | FileCheck %s --check-prefix=WEIGHT
// RUN: not smp-opt %s -split-input-file '--smp-pipeline-split=stages=3 cuts=l2.mm,l1.mm' 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not smp-opt %s -split-input-file '--smp-pipeline-split=stages=3 cuts=l1.mm,l1.mm' 2>&1 | FileCheck %s --check-prefix=SAME
// RUN: not smp-opt %s -split-input-file '--smp-pipeline-split=stages=2 cuts=embed' 2>&1 | FileCheck %s --check-prefix=FIRST
// RUN: not smp-opt %s -split-input-file '--smp-pipeline-split=stages=3 cuts=l1.mm' 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not smp-opt %s -split-input-file '--smp-pipeline-split=stages=2 cuts=l1.mm,l2.mm' 2>&1 | FileCheck %s --check-prefix=COUNT2
// RUN: not smp-opt %s -split-input-file --smp-pipeline-split=stages=5 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not smp-opt %s -split-input-file --smp-pipeline-split=stages=0 2>&1 | FileCheck %s --check-prefix=ZERO

// Three cut points (before l1.mm, l2.mm and head): at most four stages.

// UNKNOWN: error: smp-pipeline-split: no node named 'nope' computes on the parameters' path (cuts name the ONNX node a stage starts at)
// Ops on inputs only or on parameters only are no cut: they have no place
// in the stages' order.
// FREE: error: smp-pipeline-split: no node named 'mask_cast' computes on the parameters' path
// WEIGHT: error: smp-pipeline-split: no node named 'e_t' computes on the parameters' path
// ORDER: error: smp-pipeline-split: cut at 'l1.mm' leaves an empty stage (cuts must follow program order)
// SAME: error: smp-pipeline-split: cut at 'l1.mm' leaves an empty stage (cuts must follow program order)
// FIRST: error: smp-pipeline-split: cut at 'embed' leaves an empty stage (cuts must follow program order)
// COUNT: error: smp-pipeline-split: 1 cut(s) given for 3 stages (need 2)
// COUNT2: error: smp-pipeline-split: 2 cut(s) given for 2 stages (need 1)
// TOOMANY: error: cannot split the model into 5 pipeline stages: it has 3 cut point(s) (places where only 1 tensor(s) cross), so at most 4 stages
// ZERO: error: smp-pipeline-split: stages must be >= 1, got 0{{$}}
func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                %mask: tensor<4x8xi64> {smp.input = "mask"},
                %e: tensor<8x8xf32> {smp.param = "e"},
                %w1: tensor<8x8xf32> {smp.param = "w1"},
                %w2: tensor<8x8xf32> {smp.param = "w2"})
    -> (tensor<4x8xf32> {smp.output = "logits"}) {
  %m = smp.cast %mask : tensor<4x8xi64> to tensor<4x8xf32> loc("mask_cast")
  %et = smp.transpose %e {perm = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32> loc("e_t")
  %x2 = smp.add %x, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("x_mask")
  %h0 = smp.matmul %x2, %et : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("embed")
  %t1 = smp.matmul %h0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("l1.mm")
  %r1 = smp.add %h0, %t1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("l1.res")
  %t2 = smp.matmul %r1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("l2.mm")
  %r2 = smp.add %r1, %t2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("l2.res")
  %out = smp.matmul %r2, %et {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("head")
  return %out : tensor<4x8xf32>
}

// -----

// INPUT: error: smp-pipeline-split: no func @main to split
func.func @forward(%x: tensor<4xf32> {smp.input = "x"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// INPUT: error: smp-pipeline-split: no op of @main computes on both the inputs and the parameters; there is nothing to split
func.func @main(%x: tensor<4xf32> {smp.input = "x"},
                %w: tensor<4xf32> {smp.param = "w"})
    -> (tensor<4xf32> {smp.output = "y"}, tensor<4xf32> {smp.output = "z"}) {
  %0 = smp.add %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = smp.add %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
