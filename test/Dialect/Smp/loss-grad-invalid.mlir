// RUN: smp-opt %s -split-input-file -verify-diagnostics
// smp.cross_entropy_with_grad's verifier (lib/Dialect/Smp/IR/SmpTrainingOps.cpp).

func.func @labels(%l: tensor<4x10xf32>, %y: tensor<3xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'smp.cross_entropy_with_grad' op labels 'tensor<3xi64>' do not match logits 'tensor<4x10xf32>'}}
  %0:2 = smp.cross_entropy_with_grad %l, %y, %g : (tensor<4x10xf32>, tensor<3xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// -----

func.func @classes(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'smp.cross_entropy_with_grad' classes = 11 must be in [1, 10], the last dim of 'tensor<4x10xf32>'}}
  %0:2 = smp.cross_entropy_with_grad %l, %y, %g {classes = 11 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// -----

func.func @weights(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %w: tensor<9xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{'smp.cross_entropy_with_grad' op weights 'tensor<9xf32>' must be a vector of the 10 classes of 'tensor<4x10xf32>'}}
  %0:2 = smp.cross_entropy_with_grad %l, %y, %g weights %w : (tensor<4x10xf32>, tensor<4xi64>, tensor<9xf32>, tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// -----

func.func @grad_none(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'smp.cross_entropy_with_grad' op incoming grad 'tensor<f32>' does not match the loss}}
  %0:2 = smp.cross_entropy_with_grad %l, %y, %g {reduction = #smp<reduction none>} : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<4xf32>, tensor<4x10xf32>)
  return
}

// -----

func.func @loss_type(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'smp.cross_entropy_with_grad' op loss 'tensor<f16>' is not the loss of 'tensor<4x10xf32>'}}
  %0:2 = smp.cross_entropy_with_grad %l, %y, %g : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> (tensor<f16>, tensor<4x10xf32>)
  return
}

// -----

func.func @loss_shape(%l: tensor<4x10xbf16>, %y: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'smp.cross_entropy_with_grad' op loss 'tensor<4xf32>' is not the loss of 'tensor<4x10xbf16>'}}
  %0:2 = smp.cross_entropy_with_grad %l, %y, %g : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> (tensor<4xf32>, tensor<4x10xbf16>)
  return
}

// -----

func.func @grad_type(%l: tensor<4x10xbf16>, %y: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+1 {{'smp.cross_entropy_with_grad' op logits' gradient 'tensor<4x10xf32>' must be 'tensor<4x10xbf16>'}}
  %0:2 = smp.cross_entropy_with_grad %l, %y, %g : (tensor<4x10xbf16>, tensor<4xi64>, tensor<f32>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}
