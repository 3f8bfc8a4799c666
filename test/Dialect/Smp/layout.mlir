// RUN: smp-opt %s | FileCheck %s
// RUN: smp-opt %s | smp-opt | FileCheck %s

// #smp.layout (SmpAttrs.td, docs/layouts.md) prints and parses back: a tp
// split (blocks and full only when they say something), a dp chunk of the
// shape it flattens, both, and a chunk of a rank-0 tensor. The values agree
// with the grids: tp 2 splits 5 vocabulary rows 3 per rank, dp 2 chunks 12
// elements 6 per rank.

// CHECK-LABEL: func.func @layouts
// CHECK-SAME: tensor<8x4xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "w"}
// CHECK-SAME: tensor<8x6xf32> {smp.layout = #smp.layout<tp = split(dim = 1, blocks = 3)>, smp.param = "qkv"}
// CHECK-SAME: tensor<3x4xf32> {smp.layout = #smp.layout<tp = split(dim = 0, full = 5)>, smp.param = "wte"}
// CHECK-SAME: tensor<6xf32> {smp.layout = #smp.layout<dp = chunk(of = [3, 4])>, smp.state = "m"}
// CHECK-SAME: tensor<6xf32> {smp.layout = #smp.layout<tp = split(dim = 0, full = 5), dp = chunk(of = [3, 4])>, smp.state = "wte.m"}
// CHECK-SAME: tensor<1xf32> {smp.layout = #smp.layout<dp = chunk(of = [])>, smp.state = "s"}
// CHECK-SAME: -> (tensor<2x3xf32> {smp.layout = #smp.layout<tp = split(dim = 1, full = 5)>, smp.output = "logits"})
module {
  shard.grid @tp(shape = 2)
  shard.grid @dp(shape = 2)
  func.func @layouts(
      %w: tensor<8x4xf32> {smp.param = "w", smp.layout = #smp.layout<tp = split(dim = 1, blocks = 1)>},
      %qkv: tensor<8x6xf32> {smp.param = "qkv", smp.layout = #smp.layout<tp = split(dim = 1, blocks = 3)>},
      %wte: tensor<3x4xf32> {smp.param = "wte", smp.layout = #smp.layout<tp = split(dim = 0, full = 5)>},
      %m: tensor<6xf32> {smp.state = "m", smp.layout = #smp.layout<dp = chunk(of = [3, 4])>},
      %wm: tensor<6xf32> {smp.state = "wte.m", smp.layout = #smp.layout<tp = split(dim = 0, full = 5), dp = chunk(of = [3, 4])>},
      %s: tensor<1xf32> {smp.state = "s", smp.layout = #smp.layout<dp = chunk(of = [])>},
      %l: tensor<2x3xf32>)
      -> (tensor<2x3xf32> {smp.output = "logits", smp.layout = #smp.layout<tp = split(dim = 1, full = 5)>}) {
    return %l : tensor<2x3xf32>
  }
}
