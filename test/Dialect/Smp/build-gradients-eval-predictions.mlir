// smp-build-gradients eval-predictions (smpc --eval-predictions): the step
// also returns each sample's predictions, the argmax class of each of its
// rows of the cross-entropy's logits (the first index where the row holds
// its maximum, or a NaN: the negated class of the row's largest -k), and
// the labels, f32 [samples, rows per sample] (eval_predictions,
// eval_label_ids).
// RUN: smp-opt %s '--smp-build-gradients=loss=cross_entropy:logits:labels eval-predictions=1' | FileCheck %s
// Micro-batches: each micro-batch's rows placed among zeros at its samples
// and summed; dp: gathered over the ranks in their order.
// RUN: smp-opt %s '--smp-build-train-step=loss=cross_entropy:logits:labels eval-predictions=1 dp=2 microbatches=2' | FileCheck %s --check-prefix=DP
// An mse loss (a regression): the output's values and the target's, which
// pearson and spearmanr need.
// RUN: smp-opt %s '--smp-build-gradients=loss=mse:logits:t eval-metrics=pearson' | FileCheck %s --check-prefix=MSE

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[LAB:[a-z0-9]+]]: tensor<4x2xi64> {smp.input = "labels"}
// CHECK-SAME: {smp.output = "loss"}, tensor<4x2xf32> {smp.output = "eval_predictions"}, tensor<4x2xf32> {smp.output = "eval_label_ids"})
// CHECK: %[[Z:.*]] = smp.matmul
// CHECK: smp.cross_entropy %[[Z]], %[[LAB]]
// CHECK: %[[LABF:.*]] = smp.cast %[[LAB]] : tensor<4x2xi64> to tensor<4x2xf32>
// CHECK: %[[NEG:.*]] = smp.constant dense<[0, -1, -2, -3, -4]> : tensor<5xi64>
// CHECK: %[[MAX:.*]] = smp.reduce_max %[[Z]] {axes = array<i64: 2>}
// CHECK: %[[FIRST:.*]] = smp.reduce_max {{.*}} {axes = array<i64: 2>} : tensor<4x2x5xi64> -> tensor<4x2x1xi64>
// CHECK: %[[ARG:.*]] = smp.neg %[[FIRST]]
// CHECK: %[[ARGF:.*]] = smp.cast %[[ARG]] : tensor<4x2x1xi64> to tensor<4x2x1xf32>
// CHECK: %[[PRED:.*]] = smp.reshape %[[ARGF]] : tensor<4x2x1xf32> -> tensor<4x2xf32>
// CHECK: return {{.*}}, %[[PRED]], %[[LABF]] :

// DP-LABEL: func.func @train_step
// DP: %[[P0:.*]] = smp.reshape {{.*}}smp.mb = 0 : i64{{.*}} : tensor<4x2x1xf32> -> tensor<4x2xf32>
// DP: %[[Z0:.*]] = smp.constant dense<0.000000e+00> : tensor<4x2xf32>
// DP: %[[AT0:.*]] = smp.concat %[[P0]], %[[Z0]] {axis = 0 : i64{{.*}}} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
// DP: %[[P1:.*]] = smp.reshape {{.*}}smp.mb = 1 : i64{{.*}} : tensor<4x2x1xf32> -> tensor<4x2xf32>
// DP: %[[AT1:.*]] = smp.concat {{.*}}, %[[P1]] {axis = 0 : i64{{.*}}} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
// DP: %[[P:.*]] = smp.add %[[AT0]], %[[AT1]]
// DP: %[[ALL:.*]] = shard.all_gather %[[P]] on @dp grid_axes = [0] gather_axis = 0 {{.*}}: tensor<8x2xf32> -> tensor<16x2xf32>
// DP: return {{.*}}%[[ALL]]

// MSE-LABEL: func.func @train_step
// MSE-SAME: %[[T:[a-z0-9]+]]: tensor<4x2x5xf32> {smp.input = "t"}
// MSE-SAME: {smp.output = "eval_predictions"}, tensor<4x10xf32> {smp.output = "eval_label_ids"})
// MSE: %[[Z:.*]] = smp.matmul
// MSE: %[[P:.*]] = smp.reshape %[[Z]] : tensor<4x2x5xf32> -> tensor<4x10xf32>
// MSE: %[[L:.*]] = smp.reshape %[[T]] : tensor<4x2x5xf32> -> tensor<4x10xf32>
// MSE: return {{.*}}, %[[P]], %[[L]] :
module {
  func.func @main(%x: tensor<4x2x3xf32> {smp.input = "x"}, %w: tensor<3x5xf32> {smp.param = "w"}) -> (tensor<4x2x5xf32> {smp.output = "logits"}) {
    %y = smp.matmul %x, %w : (tensor<4x2x3xf32>, tensor<3x5xf32>) -> tensor<4x2x5xf32>
    return %y : tensor<4x2x5xf32>
  }
}
