// RUN: smp-opt %s '--smp-tensor-parallel=tp=3 vocab-parallel=logits' | FileCheck %s
// RUN: smp-opt %s '--smp-tensor-parallel=tp=3 vocab-parallel=logits' '--smp-build-train-step=loss=cross_entropy:logits:labels' | FileCheck %s --check-prefix=CE
// RUN: not smp-opt %s '--smp-tensor-parallel=tp=3' 2>&1 | FileCheck %s --check-prefix=NOHEAD
// RUN: smp-opt %s '--smp-tensor-parallel=tp=3 vocab-parallel=logits' '--smp-build-train-step=loss=cross_entropy:logits:labels eval-accuracy=1' | FileCheck %s --check-prefix=ACC

// A vocabulary of 7 over tp 3: each rank holds ceil(7/3) = 3 rows of the
// tied embedding / LM head (the last rank 1 row and 2 zero rows).
// CHECK: shard.grid @tp(shape = 3)
// CHECK: func.func @main(%[[IDS:.*]]: tensor<2x5xi64> {smp.input = "idx"}, %[[W:.*]]: tensor<3x6xf32> {smp.layout = #smp.layout<tp = split(dim = 0, full = 7)>, smp.param = "wte"})
// CHECK-SAME: -> (tensor<2x5x3xf32> {smp.layout = #smp.layout<tp = split(dim = 2, full = 7)>, smp.output = "logits"})
// The lookup: ids in this rank's rows [3r, 3r+3), the others zeroed, summed.
// CHECK: %[[R:.*]] = smp.tp_rank : tensor<i64>
// CHECK: %[[START:.*]] = smp.mul %[[R]], %{{.*}} : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[LOCAL:.*]] = smp.sub %[[IDS]], %[[START]]
// CHECK: %[[VALID:.*]] = smp.and
// CHECK: %[[SAFE:.*]] = smp.where %[[VALID]], %[[LOCAL]]
// CHECK: %[[E:.*]] = smp.gather %[[W]], %[[SAFE]] {axis = 0 : i64} : (tensor<3x6xf32>, tensor<2x5xi64>) -> tensor<2x5x6xf32>
// CHECK: %[[VB:.*]] = smp.reshape %[[VALID]] : tensor<2x5xi1> -> tensor<2x5x1xi1>
// CHECK: %[[M:.*]] = smp.where %[[VB]], %[[E]]
// CHECK: shard.all_reduce %[[M]] on @tp
// The LM head: column-parallel over the vocabulary.
// CHECK: %[[WT:.*]] = smp.transpose %[[W]] {perm = array<i64: 1, 0>} : tensor<3x6xf32> -> tensor<6x3xf32>
// CHECK: %[[HC:.*]] = smp.tp_copy
// CHECK: %[[LOGITS:.*]] = smp.matmul %[[HC]], %[[WT]] : (tensor<2x5x6xf32>, tensor<6x3xf32>) -> tensor<2x5x3xf32>
// CHECK: return %[[LOGITS]]

// The parallel cross-entropy: each rank's log-sum-exp and target logit per
// row from one op over its shard (its first class tp_rank x 3, the padded
// columns past class 7 not read), the log-sum-exps combined by their max
// and a sum of exponentials, the target logits by a sum; the gradient one
// op over the shard, no f32 copy of the logits.
// CE-LABEL: func.func @train_step
// CE: %[[ST:.*]] = smp.cross_entropy_shard %[[Z:.*]], %[[LAB:.*]], %[[FIRST:.*]] {classes = 7 : i64} : (tensor<2x5x3xf32>, tensor<2x5xi64>, tensor<i64>) -> tensor<2x5x2xf32>
// CE: %[[LSE:.*]] = smp.slice %[[ST]] {{.*}} -> tensor<2x5x1xf32>
// CE: %[[T:.*]] = smp.slice %[[ST]] {{.*}} -> tensor<2x5x1xf32>
// CE: %[[M:.*]] = shard.all_reduce %[[LSE]] on @tp grid_axes = [0] reduction = max
// CE: smp.exp
// CE: shard.all_reduce {{.*}} on @tp grid_axes = [0] : tensor<2x5x1xf32>
// CE: smp.log
// CE: shard.all_reduce %[[T]] on @tp grid_axes = [0] : tensor<2x5x1xf32>
// CE-NOT: smp.reduce_max
// CE: smp.cross_entropy_shard_grad %[[Z]], %[[LAB]], %[[FIRST]], %[[ST]], %{{.*}} {classes = 7 : i64} : {{.*}} -> tensor<2x5x3xf32>
// CE: smp.gather_grad {{.*}} -> tensor<3x6xf32>
// CE: smp.sgd_update {{.*}} : tensor<3x6xf32>

// An evaluation's accuracy (eval-accuracy): each rank ranks its shard's
// classes against the label logits the loss all-reduces, and the ranks
// are summed over @tp (a row is a hit at 0): no rank holds more than its
// shard of the logits.
// ACC-LABEL: func.func @train_step
// ACC: %[[ST:.*]] = smp.cross_entropy_shard %[[Z:.*]], %[[LAB:.*]], %[[FIRST:.*]] {classes = 7 : i64}
// ACC: %[[T:.*]] = smp.slice %[[ST]] {limits = array<i64: 2, 5, 2>, starts = array<i64: 0, 0, 1>
// ACC: %[[TALL:.*]] = shard.all_reduce %[[T]] on @tp grid_axes = [0] : tensor<2x5x1xf32>
// ACC: %[[TROW:.*]] = smp.reshape %[[TALL]] : tensor<2x5x1xf32> -> tensor<2x5xf32>
// ACC: %[[RANK:.*]] = smp.label_rank %[[Z]], %[[LAB]], %[[FIRST]] target %[[TROW]] {classes = 7 : i64} : (tensor<2x5x3xf32>, tensor<2x5xi64>, tensor<i64>, tensor<2x5xf32>) -> tensor<2x5xf32>
// ACC: %[[RALL:.*]] = shard.all_reduce %[[RANK]] on @tp grid_axes = [0] : tensor<2x5xf32>
// ACC: smp.equal %[[RALL]], %{{.*}} : (tensor<2x5xf32>, tensor<f32>) -> tensor<2x5xi1>

// Without a cross-entropy on the logits the LM head stays whole, and so
// does its tied embedding: there is nothing to split.
// NOHEAD: error: smp-tensor-parallel: found no layer to split over tp 3

module {
  func.func @main(%idx: tensor<2x5xi64> {smp.input = "idx"},
                  %wte: tensor<7x6xf32> {smp.param = "wte"})
      -> (tensor<2x5x7xf32> {smp.output = "logits"}) {
    %e = smp.gather %wte, %idx {axis = 0 : i64} : (tensor<7x6xf32>, tensor<2x5xi64>) -> tensor<2x5x6xf32>
    %h = smp.tanh %e : tensor<2x5x6xf32>
    %wt = smp.transpose %wte {perm = array<i64: 1, 0>} : tensor<7x6xf32> -> tensor<6x7xf32>
    %logits = smp.matmul %h, %wt : (tensor<2x5x6xf32>, tensor<6x7xf32>) -> tensor<2x5x7xf32>
    return %logits : tensor<2x5x7xf32>
  }
}
