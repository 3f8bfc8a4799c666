// RUN: smp-opt %s -split-input-file -verify-diagnostics

// Every refusal of #smp.layout (SmpAttrs.cpp): its syntax, its own
// consistency, and its agreement with the value it is on and the module's
// shard.grid @tp / @dp.

// expected-error @+1 {{'dim' must be >= 0, got -1}}
func.func @negative_dim(%w: tensor<4xf32> {smp.layout = #smp.layout<tp = split(dim = -1)>})

// -----

// expected-error @+1 {{'full' must be >= 1, got 0}}
func.func @zero_full(%w: tensor<4xf32> {smp.layout = #smp.layout<tp = split(dim = 0, full = 0)>})

// -----

// expected-error @+1 {{expected 'blocks' or 'full' (once each) in a tp split, got 'rows'}}
func.func @unknown_key(%w: tensor<4xf32> {smp.layout = #smp.layout<tp = split(dim = 0, rows = 2)>})

// -----

// expected-error @+1 {{expected 'blocks' or 'full' (once each) in a tp split, got 'blocks'}}
func.func @twice(%w: tensor<4xf32> {smp.layout = #smp.layout<tp = split(dim = 0, blocks = 2, blocks = 2)>})

// -----

// expected-error @+1 {{expected 'tp = split(...)' then 'dp = chunk(...)' (once each), got 'pp'}}
func.func @unknown_axis(%w: tensor<4xf32> {smp.layout = #smp.layout<pp = split(dim = 0)>})

// -----

// expected-error @+1 {{expected 'tp = split(...)' then 'dp = chunk(...)' (once each), got 'tp'}}
func.func @dp_before_tp(%w: tensor<4xf32> {smp.layout = #smp.layout<dp = chunk(of = [4]), tp = split(dim = 0)>})

// -----

// expected-error @+1 {{#smp.layout: tp split blocks must be >= 1, got 0}}
func.func @zero_blocks(%w: tensor<4xf32> {smp.layout = #smp.layout<tp = split(dim = 0, blocks = 0)>})

// -----

// expected-error @+1 {{#smp.layout splits over neither tp nor dp (a whole value carries no smp.layout)}}
func.func @empty(%w: tensor<4xf32> {smp.layout = #smp.layout<>})

// -----

// expected-error @+1 {{#smp.layout: full extent 5 is not a positive multiple of the 2 block(s)}}
func.func @full_blocks(%w: tensor<4xf32> {smp.layout = #smp.layout<tp = split(dim = 0, blocks = 2, full = 5)>})

// -----

// expected-error @+1 {{#smp.layout: dp chunk of a shape with a negative dim}}
func.func @negative_chunk(%w: tensor<4xf32> {smp.layout = #smp.layout<dp = chunk(of = [-4])>})

// -----

// expected-error @+1 {{#smp.layout: tp split dim 2 is out of range for the chunked tensor of rank 2}}
func.func @chunk_split_dim(%w: tensor<8xf32> {smp.layout = #smp.layout<tp = split(dim = 2), dp = chunk(of = [2, 4])>})

// -----

// expected-error @+1 {{'smp.layout' of argument #0 must be a #smp.layout}}
func.func private @not_a_layout(%w: tensor<4xf32> {smp.layout = array<i64: 0, 1>})

// -----

// expected-error @+1 {{'smp.layout' of argument #0 ('f32'): a layout needs a statically shaped tensor}}
func.func private @scalar(%w: f32 {smp.layout = #smp.layout<tp = split(dim = 0)>})

// -----

// expected-error @+1 {{'smp.layout' of argument #0 ('tensor<4xf32>'): tp split dim 1 is out of range for rank 1}}
func.func private @split_dim(%w: tensor<4xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>})

// -----

// expected-error @+1 {{'smp.layout' of argument #0 ('tensor<4x5xf32>'): dim 1 of size 5 is not 3 equal blocks}}
func.func private @blocks(%w: tensor<4x5xf32> {smp.layout = #smp.layout<tp = split(dim = 1, blocks = 3)>})

// -----

// expected-error @+1 {{'smp.layout' of argument #0 ('tensor<2x2xf32>'): a dp chunk is 1-D}}
func.func private @chunk_rank(%w: tensor<2x2xf32> {smp.layout = #smp.layout<dp = chunk(of = [4, 4])>})

// -----

// expected-error @+1 {{'smp.layout' of argument #0 ('tensor<4xf32>'): the chunked shape has too many elements}}
func.func private @chunk_overflow(%w: tensor<4xf32> {smp.layout = #smp.layout<dp = chunk(of = [4294967296, 4294967296, 4])>})

// -----

// 9 elements over dp 2: 5 per rank (the last one padded).
module {
  shard.grid @dp(shape = 2)
  // expected-error @+1 {{'smp.layout' of argument #0 ('tensor<4xf32>'): a dp chunk of the 9 elements over dp 2 holds 5, not 4}}
  func.func private @chunk_size(%w: tensor<4xf32> {smp.layout = #smp.layout<dp = chunk(of = [3, 3])>})
}

// -----

// 7 rows over tp 3: 3 per rank.
module {
  shard.grid @tp(shape = 3)
  // expected-error @+1 {{'smp.layout' of argument #0 ('tensor<2x6xf32>'): dim 0 holds 2, but a split of the full 7 over tp 3 holds 3}}
  func.func private @full(%w: tensor<2x6xf32> {smp.layout = #smp.layout<tp = split(dim = 0, full = 7)>})
}

// -----

// expected-error @+1 {{'smp.layout' of result #0 ('tensor<2xf32>'): tp split dim 1 is out of range for rank 1}}
func.func @result(%x: tensor<2xf32>) -> (tensor<2xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>}) {
  return %x : tensor<2xf32>
}
