// smp-mark-eval-padding: whether an evaluation (smprun --eval-data) can pad
// a short last batch with samples whose labels are -100. It can for a
// cross_entropy:LOGITS:LABELS loss whose LOGITS are computed sample by
// sample (the module gets smp.eval_pad_labels, the labels input); anything
// else gets smp.eval_no_pad saying why.
// RUN: smp-opt %s -split-input-file --smp-mark-eval-padding="loss=cross_entropy:logits:labels" | FileCheck %s --check-prefix=CE
// RUN: smp-opt %s -split-input-file --smp-mark-eval-padding="loss=mse:logits:t" | FileCheck %s --check-prefix=MSE
// RUN: smp-opt %s -split-input-file --smp-mark-eval-padding="loss=logits" | FileCheck %s --check-prefix=OWN
// A model's own loss output (OwnLossPadding.h): test/Dialect/Smp/
// mark-eval-padding-own-loss.mlir.
// RUN: smp-opt %s -split-input-file --smp-mark-eval-padding="loss=cross_entropy:missing:labels" | FileCheck %s --check-prefix=MISSING

// Per sample: a matmul by a weight and a softmax over the classes.
// CE: module attributes {smp.eval_pad_labels = "labels"}
// MSE: module attributes {smp.eval_no_pad = "an mse loss averages over every sample of the batch, padding included"}
// A non-scalar output named as the loss is smp-build-gradients' error.
// OWN-NOT: smp.eval_
// An output the loss names that the model lacks is smp-build-gradients'
// error: nothing is marked.
// MISSING-NOT: smp.eval_
module {
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"}, %w: tensor<4x3xf32> {smp.param = "w"}) -> (tensor<2x3xf32> {smp.output = "logits"}) {
    %m = smp.matmul %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %s = smp.softmax %m {axis = 1 : i64} : tensor<2x3xf32>
    return %s : tensor<2x3xf32>
  }
}

// -----

// Logits that mix the samples (a softmax over the batch dim): padding
// samples would change the real ones'.
// CE: module attributes {smp.eval_no_pad = "the output 'logits' the loss reads is not computed sample by sample ('smp.softmax' {{.*}}, mixing the batch's samples), so padding samples would change the others'"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}) -> (tensor<2x3xf32> {smp.output = "logits"}) {
    %s = smp.softmax %x {axis = 0 : i64} : tensor<2x3xf32>
    return %s : tensor<2x3xf32>
  }
}

// -----

// Logits computed from the parameters only hold no samples.
// CE: module attributes {smp.eval_no_pad = "the output 'logits' the loss reads is not computed sample by sample (it holds no samples (computed from parameters and constants only)), so padding samples would change the others'"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<2x3xf32> {smp.param = "w"}) -> (tensor<2x3xf32> {smp.output = "logits"}) {
    %s = smp.add %w, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    return %s : tensor<2x3xf32>
  }
}

