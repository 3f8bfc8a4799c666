// A concat or split whose axis is stored negative (ONNX's axis=-1, which the
// importer keeps) is split by smp-tensor-parallel exactly as the same op
// with the axis counted from 0. The negative axis used to be compared as
// stored, so a concat along the split dimension was taken for "another
// dim" and its pieces split alike: a wrong layout, silently.
// RUN: smp-opt %s --smp-tensor-parallel=tp=2 | sed -e 's/axis = -1 : i64/axis = LAST/' > %t.neg
// RUN: sed -e 's/axis = -1 : i64/axis = 2 : i64/' %s | smp-opt --smp-tensor-parallel=tp=2 | sed -e 's/axis = 2 : i64/axis = LAST/' > %t.pos
// RUN: diff %t.pos %t.neg
// RUN: FileCheck %s --input-file %t.neg

// The fused QKV projection split along its last dim into Q, K and V: each
// rank keeps its share of each part (sizes halved); the MLP hidden layer
// made of two halves concatenated along the last dim ends the region (its
// pieces cannot each be split alike along the concat axis), so the concat
// is not split.
// CHECK: smp.split %{{.*}} {axis = LAST, sizes = array<i64: 4, 4, 4>} : tensor<2x4x12xf32>
// CHECK: smp.concat {{.*}} {axis = LAST} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>

module {
  func.func @main(%x: tensor<2x4x8xf32> {smp.input = "x"},
                  %wqkv: tensor<8x24xf32> {smp.param = "wqkv"},
                  %wo: tensor<8x8xf32> {smp.param = "wo"},
                  %wa: tensor<8x8xf32> {smp.param = "wa"},
                  %wb: tensor<8x8xf32> {smp.param = "wb"},
                  %w2: tensor<16x8xf32> {smp.param = "w2"}) -> (tensor<2x4x8xf32> {smp.output = "y"}) {
    %qkv = smp.matmul %x, %wqkv : (tensor<2x4x8xf32>, tensor<8x24xf32>) -> tensor<2x4x24xf32> loc("qkv")
    %s:3 = smp.split %qkv {axis = -1 : i64, sizes = array<i64: 8, 8, 8>} : tensor<2x4x24xf32> -> tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>
    %qk = smp.mul %s#0, %s#1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %a = smp.mul %qk, %s#2 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %o = smp.matmul %a, %wo : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("attn_out")
    %ha = smp.matmul %o, %wa : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("ha")
    %hb = smp.matmul %o, %wb : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("hb")
    %h = smp.concat %ha, %hb {axis = -1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x16xf32>
    %g = smp.gelu %h : tensor<2x4x16xf32>
    %y = smp.matmul %g, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32> loc("mlp_out")
    return %y : tensor<2x4x8xf32>
  }
}
