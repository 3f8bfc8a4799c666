// A product of a shared weight outside any region's path (here w2 on the
// input directly) keeps the union open: the layer stays replicated, and with
// nothing else to split the pass says so.
// RUN: not smp-opt %s --smp-tensor-parallel=tp=2 2>&1 | FileCheck %s
// CHECK: found no layer to split over tp 2
module {
  func.func @main(%x: tensor<2x16xf32> {smp.input = "x"},
                  %w1: tensor<16x16xf32> {smp.param = "w1"},
                  %w2: tensor<16x16xf32> {smp.param = "w2"})
      -> (tensor<2x16xf32> {smp.output = "y"}) {
    %h1 = smp.matmul %x, %w1 : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
    %a1 = smp.gelu %h1 : tensor<2x16xf32>
    %y1 = smp.matmul %a1, %w2 : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
    %z = smp.matmul %x, %w2 : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
    %y = smp.add %y1, %z : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
    return %y : tensor<2x16xf32>
  }
}
