// RUN: smp-opt %s '--smp-build-train-step=loss=mse:y:target' | FileCheck %s

// nn.Embedding(padding_idx=1): positions whose id is 1 add nothing to the
// table's gradient (the ids are compared with 1, their gradient rows
// zeroed before the scatter-add); the forward is a plain lookup.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[E:.*]] = smp.gather %{{.*}}, %[[IDS:.*]] {axis = 0 : i64, padding_idx = 1 : i64}
// CHECK: %[[ONE:.*]] = smp.constant dense<1> : tensor<i64>
// CHECK: %[[PAD:.*]] = smp.equal %[[IDS]], %[[ONE]] : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi1>
// CHECK: %[[PADB:.*]] = smp.reshape %[[PAD]] : tensor<2x3xi1> -> tensor<2x3x1xi1>
// CHECK: %[[G:.*]] = smp.where %[[PADB]]
// CHECK: smp.gather_grad %[[IDS]], %[[G]] {axis = 0 : i64}

// (Under tp such a table stays whole, its gradient mask comparing global
// ids: test/smprun/real-plans-bert.test trains BERT's under tp2.)

module {
  func.func @main(%ids: tensor<2x3xi64> {smp.input = "idx"},
                  %w: tensor<5x4xf32> {smp.param = "emb"})
      -> (tensor<2x3x4xf32> {smp.output = "y"}) {
    %e = smp.gather %w, %ids {axis = 0 : i64, padding_idx = 1 : i64}
        : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    return %e : tensor<2x3x4xf32>
  }
}
