// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-build-train-step=loss=cross_entropy:logits:labels'

// Vocab-parallel logits (a tp split layout on the result, BuildGradients.cpp)
// are split on their class dim over a shard.grid @tp; anything else is
// refused rather than given a cross-entropy over the wrong classes.

module {
  shard.grid @tp(shape = 2)
  // expected-error @+1 {{cross_entropy logits 'logits' have layout #smp.layout<tp = split(dim = 0)>; only the class dim can be split, over a shard.grid @tp}}
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"})
      -> (tensor<2x3xf32> {smp.output = "logits", smp.layout = #smp.layout<tp = split(dim = 0)>}) {
    return %x : tensor<2x3xf32>
  }
}

// -----

// expected-error @+1 {{cross_entropy logits 'logits' have layout #smp.layout<tp = split(dim = 1)>; only the class dim can be split, over a shard.grid @tp}}
func.func @main(%x: tensor<2x3xf32> {smp.input = "x"})
    -> (tensor<2x3xf32> {smp.output = "logits", smp.layout = #smp.layout<tp = split(dim = 1)>}) {
  return %x : tensor<2x3xf32>
}
