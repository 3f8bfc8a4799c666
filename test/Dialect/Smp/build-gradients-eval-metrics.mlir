// smp-build-gradients eval-metrics (smpc --eval-metrics): a metric other
// than the accuracy makes the step count the confusion matrix of the
// labels the cross-entropy reads by their row's argmax class (the first
// index where the row holds its maximum, or a NaN): the output
// eval_confusion [label, argmax class], the labels' one-hot rows (zero
// where the label is ignored) transposed times the argmax's.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-build-gradients=loss=cross_entropy:logits:labels eval-metrics=f1_macro,matthews_correlation' | FileCheck %s
// Micro-batches: each micro-batch's matrix, summed; dp: summed over the
// ranks like the loss.
// RUN: smp-opt %s -split-input-file -verify-diagnostics '--smp-build-train-step=loss=cross_entropy:logits:labels eval-metrics=f1_macro dp=2 microbatches=2' | FileCheck %s --check-prefix=DP
// `accuracy` alone counts the hits, not the matrix.
// RUN: smp-opt %s -split-input-file '--smp-build-gradients=loss=cross_entropy:logits:labels eval-metrics=accuracy' | FileCheck %s --check-prefix=ACC
// topK_accuracy counts the labels of rank below K (eval_hits_topK), beside
// the labels (a K of at least the classes is refused: eval-accuracy.test).
// RUN: smp-opt %s -split-input-file '--smp-build-gradients=loss=cross_entropy:logits:labels eval-metrics=top3_accuracy' | FileCheck %s --check-prefix=TOPK

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[LAB:[a-z0-9]+]]: tensor<4xi64> {smp.input = "labels"}
// CHECK-SAME: {smp.output = "loss"}, tensor<5x5xf32> {smp.output = "eval_confusion"})
// CHECK: %[[Z:.*]] = smp.matmul
// CHECK: smp.cross_entropy %[[Z]], %[[LAB]]
// CHECK: %[[NEG:.*]] = smp.constant dense<[0, -1, -2, -3, -4]> : tensor<5xi64>
// CHECK: %[[NONE:.*]] = smp.constant dense<-5> : tensor<i64>
// CHECK: %[[MAX:.*]] = smp.reduce_max %[[Z]] {axes = array<i64: 1>}
// CHECK: %[[ATMAX:.*]] = smp.equal %[[Z]], %[[MAX]]
// CHECK: %[[SELF:.*]] = smp.equal %[[Z]], %[[Z]]
// CHECK: %[[NAN:.*]] = smp.not %[[SELF]]
// CHECK: %[[TOP:.*]] = smp.or %[[ATMAX]], %[[NAN]]
// CHECK: %[[PICK:.*]] = smp.where %[[TOP]], %[[NEG]], %[[NONE]]
// CHECK: %[[FIRST:.*]] = smp.reduce_max %[[PICK]] {axes = array<i64: 1>} : tensor<4x5xi64> -> tensor<4x1xi64>
// CHECK: %[[ISP:.*]] = smp.equal %[[NEG]], %[[FIRST]]
// CHECK: %[[PRED:.*]] = smp.cast %[[ISP]] : tensor<4x5xi1> to tensor<4x5xf32>
// CHECK: %[[COL:.*]] = smp.reshape %[[LAB]] : tensor<4xi64> -> tensor<4x1xi64>
// CHECK: %[[NEGL:.*]] = smp.neg %[[COL]]
// CHECK: %[[ISL:.*]] = smp.equal %[[NEGL]], %[[NEG]]
// CHECK: %[[LABF:.*]] = smp.cast %[[ISL]] : tensor<4x5xi1> to tensor<4x5xf32>
// CHECK: %[[IGN:.*]] = smp.constant dense<-100> : tensor<i64>
// CHECK: %[[ISIGN:.*]] = smp.equal %[[COL]], %[[IGN]]
// CHECK: %[[KEEP:.*]] = smp.not %[[ISIGN]]
// CHECK: %[[KEPT:.*]] = smp.cast %[[KEEP]] : tensor<4x1xi1> to tensor<4x1xf32>
// CHECK: %[[ROWS:.*]] = smp.mul %[[LABF]], %[[KEPT]]
// CHECK: %[[CONF:.*]] = smp.matmul %[[ROWS]], %[[PRED]] {transpose_lhs = true} : (tensor<4x5xf32>, tensor<4x5xf32>) -> tensor<5x5xf32>
// CHECK-NOT: smp.label_rank
// CHECK: return {{.*}}, %[[CONF]] :

// DP-LABEL: func.func @train_step
// DP: %[[C0:.*]] = smp.matmul {{.*}}smp.mb = 0 : i64{{.*}}transpose_lhs = true{{.*}} -> tensor<5x5xf32>
// DP: %[[C1:.*]] = smp.matmul {{.*}}smp.mb = 1 : i64{{.*}}transpose_lhs = true{{.*}} -> tensor<5x5xf32>
// DP: %[[C:.*]] = smp.add %[[C0]], %[[C1]]
// DP: %[[CG:.*]] = shard.all_reduce %[[C]] on @dp
// DP: return {{.*}}, %[[CG]] :

// TOPK-LABEL: func.func @train_step
// TOPK-SAME: {smp.output = "loss"}, tensor<f32> {smp.output = "eval_labels"}, tensor<f32> {smp.output = "eval_hits_top3"})
// TOPK: %[[RANK:.*]] = smp.label_rank
// TOPK: %[[KEPT:.*]] = smp.cast {{.*}} : tensor<4xi1> to tensor<4xf32>
// TOPK: %[[K:.*]] = smp.constant dense<3.000000e+00> : tensor<f32>
// TOPK: %[[AMONG:.*]] = smp.less %[[RANK]], %[[K]]
// TOPK: %[[AMONGF:.*]] = smp.cast %[[AMONG]]
// TOPK: %[[HIT:.*]] = smp.mul %[[AMONGF]], %[[KEPT]]
// TOPK: %[[HITS:.*]] = smp.reduce_sum %[[HIT]]
// TOPK: %[[COUNT:.*]] = smp.reduce_sum %[[KEPT]]
// TOPK: return {{.*}}, %[[COUNT]], %[[HITS]] :

// ACC-LABEL: func.func @train_step
// ACC-SAME: {smp.output = "eval_hits"}, tensor<f32> {smp.output = "eval_labels"})
// ACC-NOT: eval_confusion
module {
  func.func @main(%x: tensor<4x3xf32> {smp.input = "x"}, %w: tensor<3x5xf32> {smp.param = "w"}) -> (tensor<4x5xf32> {smp.output = "logits"}) {
    %y = smp.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    return %y : tensor<4x5xf32>
  }
}

// -----

// A language model's vocabulary is refused: the matrix is a classifier's.
module {
  // expected-error @+1 {{--eval-metrics f1_macro: the logits have 2000 classes, and a confusion matrix is counted for at most 1024 (a classifier's); a language model's is --eval-metrics accuracy}}
  func.func @main(%x: tensor<4x3xf32> {smp.input = "x"}, %w: tensor<3x2000xf32> {smp.param = "w"}) -> (tensor<4x2000xf32> {smp.output = "logits"}) {
    %y = smp.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2000xf32>) -> tensor<4x2000xf32>
    return %y : tensor<4x2000xf32>
  }
}

