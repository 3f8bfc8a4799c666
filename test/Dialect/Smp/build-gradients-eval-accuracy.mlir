// smp-build-gradients eval-accuracy (smpc --eval-accuracy): after the loss,
// each row's label rank (smp.label_rank: the classes before the label) and
// the counts an evaluation's accuracy is taken from, as the outputs
// eval_hits (rows of rank 0 whose label is not -100) and eval_labels.
// RUN: smp-opt %s -split-input-file '--smp-build-gradients=loss=cross_entropy:logits:labels eval-accuracy=1' | FileCheck %s
// Micro-batches: each micro-batch's counts, summed; dp: summed over the
// ranks like the loss (smp-gradient-all-reduce).
// RUN: smp-opt %s -split-input-file '--smp-build-train-step=loss=cross_entropy:logits:labels eval-accuracy=1 dp=2 microbatches=2' | FileCheck %s --check-prefix=DP
// Without the option, no such outputs.
// RUN: smp-opt %s -split-input-file '--smp-build-gradients=loss=cross_entropy:logits:labels' | FileCheck %s --check-prefix=OFF

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[LAB:[a-z0-9]+]]: tensor<4xi64> {smp.input = "labels"}
// CHECK-SAME: {smp.output = "loss"}, tensor<f32> {smp.output = "eval_hits"}, tensor<f32> {smp.output = "eval_labels"})
// CHECK: %[[Z:.*]] = smp.matmul
// CHECK: smp.cross_entropy %[[Z]], %[[LAB]]
// CHECK: %[[FIRST:.*]] = smp.constant dense<0> : tensor<i64>
// CHECK: %[[RANK:.*]] = smp.label_rank %[[Z]], %[[LAB]], %[[FIRST]] {classes = 5 : i64} : (tensor<4x5xf32>, tensor<4xi64>, tensor<i64>) -> tensor<4xf32>
// CHECK: %[[IGN:.*]] = smp.constant dense<-100> : tensor<i64>
// CHECK: %[[ISIGN:.*]] = smp.equal %[[LAB]], %[[IGN]]
// CHECK: %[[NOT:.*]] = smp.not %[[ISIGN]]
// CHECK: %[[KEPT:.*]] = smp.cast %[[NOT]] : tensor<4xi1> to tensor<4xf32>
// CHECK: %[[ZERO:.*]] = smp.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[TOP:.*]] = smp.equal %[[RANK]], %[[ZERO]]
// CHECK: %[[TOPF:.*]] = smp.cast %[[TOP]]
// CHECK: %[[HIT:.*]] = smp.mul %[[TOPF]], %[[KEPT]]
// CHECK: %[[HITS:.*]] = smp.reduce_sum %[[HIT]]
// CHECK: %[[COUNT:.*]] = smp.reduce_sum %[[KEPT]]
// CHECK-NOT: smp.label_rank
// CHECK: return {{.*}}, %[[HITS]], %[[COUNT]] :

// DP-LABEL: func.func @train_step
// DP: smp.label_rank {{.*}}smp.mb = 0 : i64{{.*}} : (tensor<4x5xf32>, tensor<4xi64>, tensor<i64>) -> tensor<4xf32>
// DP: %[[H0:.*]] = smp.reduce_sum
// DP: %[[L0:.*]] = smp.reduce_sum
// DP: smp.label_rank {{.*}}smp.mb = 1 : i64{{.*}} : (tensor<4x5xf32>, tensor<4xi64>, tensor<i64>) -> tensor<4xf32>
// DP: %[[H1:.*]] = smp.reduce_sum
// DP: %[[L1:.*]] = smp.reduce_sum
// DP: %[[H:.*]] = smp.add %[[H0]], %[[H1]]
// DP: %[[L:.*]] = smp.add %[[L0]], %[[L1]]
// DP: %[[HG:.*]] = shard.all_reduce %[[H]] on @dp
// DP: %[[LG:.*]] = shard.all_reduce %[[L]] on @dp
// DP: return {{.*}}, %[[HG]], %[[LG]] :

// OFF-NOT: smp.label_rank
// OFF-NOT: eval_hits
module {
  func.func @main(%x: tensor<4x3xf32> {smp.input = "x"}, %w: tensor<3x5xf32> {smp.param = "w"}) -> (tensor<4x5xf32> {smp.output = "logits"}) {
    %y = smp.matmul %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    return %y : tensor<4x5xf32>
  }
}
