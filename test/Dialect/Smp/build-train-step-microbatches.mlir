// RUN: smp-opt %s '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' | FileCheck %s --check-prefix=MB
// RUN: smp-opt %s --smp-pipeline-split=stages=2 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' | FileCheck %s --check-prefix=PP
// RUN: smp-opt %s --smp-pipeline-split=stages=2 '--smp-build-train-step=loss=cross_entropy:logits:labels' | FileCheck %s --check-prefix=PP1
// RUN: smp-opt %s '--smp-build-train-step=loss=mse:logits:target microbatches=2' | FileCheck %s --check-prefix=MSE

// A tiny model: an embedding `e` (x @ e), two residual layers and a head
// tied to the embedding (@ e^T). Batch 2 per micro-batch.

// Two micro-batches, no pipeline stages: the step takes the inputs at twice
// the batch (4) and slices them; @main's forward runs once per slice (ops
// marked smp.mb), each micro-batch's loss is its summed cross-entropy over
// the whole step's count of labels, its backward is marked smp.bwd, and the
// gradients are summed over the micro-batches. Without stages every
// parameter is on stage 0.
// MB-LABEL: func.func @train_step
// MB-SAME: %[[E:[^:]*]]: tensor<4x4xf32> {smp.param = "e", smp.stage = 0 : i64}
// MB-SAME: %[[W1:[^:]*]]: tensor<4x4xf32> {smp.param = "w1", smp.stage = 0 : i64}
// MB-SAME: %[[W2:[^:]*]]: tensor<4x4xf32> {smp.param = "w2", smp.stage = 0 : i64}
// MB-SAME: %[[X:[^:]*]]: tensor<4x4xf32> {smp.input = "x"}
// MB-SAME: %[[Y:[^:]*]]: tensor<4xi64> {smp.input = "labels"}
// MB-SAME: -> (tensor<4x4xf32> {smp.update = "e"}, tensor<4x4xf32> {smp.update = "w1"}, tensor<4x4xf32> {smp.update = "w2"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"})
// MB-NEXT: %[[X0:.*]] = smp.slice %[[X]] {limits = array<i64: 2, 4>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<4x4xf32> -> tensor<2x4xf32>
// MB-NEXT: %[[H0:.*]] = smp.matmul %[[X0]], %[[E]] {smp.mb = 0 : i64, smp.stage = 0 : i64}
// MB: %[[LOGITS0:.*]] = smp.matmul %{{.*}}, %[[E]] {smp.mb = 0 : i64, smp.stage = 0 : i64, transpose_rhs = true}
// MB-NEXT: %[[X1:.*]] = smp.slice %[[X]] {limits = array<i64: 4, 4>, starts = array<i64: 2, 0>, steps = array<i64: 1, 1>} : tensor<4x4xf32> -> tensor<2x4xf32>
// MB-NEXT: %[[H1:.*]] = smp.matmul %[[X1]], %[[E]] {smp.mb = 1 : i64, smp.stage = 0 : i64}
// MB: %[[LOGITS1:.*]] = smp.matmul %{{.*}}, %[[E]] {smp.mb = 1 : i64, smp.stage = 0 : i64, transpose_rhs = true}
// MB-NEXT: %[[Y0:.*]] = smp.slice %[[Y]] {limits = array<i64: 2>, smp.mb = 0 : i64, starts = array<i64: 0>, steps = array<i64: 1>} : tensor<4xi64> -> tensor<2xi64>
// MB-NEXT: %[[CE0:.*]] = smp.cross_entropy %[[LOGITS0]], %[[Y0]] {reduction = #smp<reduction sum>, smp.mb = 0 : i64, smp.stage = 0 : i64}
// The count of labels that are not ignored, over every micro-batch.
// MB: %[[EQ:.*]] = smp.equal %[[Y]], %{{.*}} {smp.mb = 0 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// MB: %[[COUNT:.*]] = smp.reduce_sum %{{.*}} {axes = array<i64: 0>, keepdims = false, smp.mb = 0 : i64} : tensor<4xf32> -> tensor<f32>
// MB-NEXT: %[[L0:.*]] = smp.div %[[CE0]], %[[COUNT]] {smp.mb = 0 : i64, smp.stage = 0 : i64}
// MB: smp.cross_entropy_grad %[[LOGITS0]], %[[Y0]], %{{.*}} {reduction = #smp<reduction sum>, smp.bwd, smp.mb = 0 : i64, smp.stage = 0 : i64}
// MB: %[[GE0:.*]] = smp.add %{{.*}}, %{{.*}} {smp.bwd, smp.mb = 0 : i64, smp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// MB: %[[Y1:.*]] = smp.slice %[[Y]] {limits = array<i64: 4>, smp.mb = 1 : i64, starts = array<i64: 2>, steps = array<i64: 1>}
// MB-NEXT: %[[CE1:.*]] = smp.cross_entropy %[[LOGITS1]], %[[Y1]] {reduction = #smp<reduction sum>, smp.mb = 1 : i64, smp.stage = 0 : i64}
// MB-NEXT: %[[L1:.*]] = smp.div %[[CE1]], %[[COUNT]] {smp.mb = 1 : i64, smp.stage = 0 : i64}
// MB-NEXT: %[[LOSS:.*]] = smp.add %[[L0]], %[[L1]] {smp.mb = 1 : i64, smp.stage = 0 : i64}
// MB: smp.cross_entropy_grad %[[LOGITS1]], %[[Y1]], %{{.*}} {reduction = #smp<reduction sum>, smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64}
// Accumulation: each of micro-batch 1's gradients is added to micro-batch
// 0's as soon as it is made (w2's first, then w1's, then e's).
// MB: smp.matmul %{{.*}}, %{{.*}} {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64, transpose_lhs = true}
// MB: %[[GW2B:.*]] = smp.matmul %{{.*}}, %{{.*}} {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64, transpose_lhs = true}
// MB-NEXT: %[[GW2:.*]] = smp.add %{{.*}}, %[[GW2B]] {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64}
// MB: %[[GW1B:.*]] = smp.matmul %{{.*}}, %{{.*}} {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64, transpose_lhs = true}
// MB-NEXT: %[[GW1:.*]] = smp.add %{{.*}}, %[[GW1B]] {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64}
// MB: %[[GE1:.*]] = smp.add %{{.*}}, %{{.*}} {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// MB-NEXT: %[[GE:.*]] = smp.add %[[GE0]], %[[GE1]] {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64}
// MB: %[[NORM:.*]] = smp.sqrt %{{.*}} {smp.stage = 0 : i64}
// MB-NEXT: %[[NEWE:.*]], %{{.*}} = smp.sgd_update %[[E]], %[[GE]], %[[GE]]
// MB-NEXT: %[[NEWW1:.*]], %{{.*}} = smp.sgd_update %[[W1]], %[[GW1]], %[[GW1]]
// MB-NEXT: %[[NEWW2:.*]], %{{.*}} = smp.sgd_update %[[W2]], %[[GW2]], %[[GW2]]
// MB-NEXT: return %[[NEWE]], %[[NEWW1]], %[[NEWW2]], %[[LOSS]], %[[NORM]]

// After smp-pipeline-split (stages=2: e, w1 | w2, head): e is used on both
// stages, so the step gets a second argument for it (stage 1, the same
// smp.param name). Each copy's gradient is the sum of both copies'
// (stage 0's first) computed on its own stage; the norm counts e once; both
// copies are updated.
// PP-LABEL: func.func @train_step
// PP-SAME: %[[E0:[^:]*]]: tensor<4x4xf32> {smp.param = "e", smp.stage = 0 : i64}
// PP-SAME: %[[W1:[^:]*]]: tensor<4x4xf32> {smp.param = "w1", smp.stage = 0 : i64}
// PP-SAME: %[[W2:[^:]*]]: tensor<4x4xf32> {smp.param = "w2", smp.stage = 1 : i64}
// PP-SAME: %[[E1:[^:]*]]: tensor<4x4xf32> {smp.param = "e", smp.stage = 1 : i64}
// PP-SAME: %[[X:[^:]*]]: tensor<4x4xf32> {smp.input = "x"}
// PP-SAME: %[[Y:[^:]*]]: tensor<4xi64> {smp.input = "labels"}
// PP-SAME: -> (tensor<4x4xf32> {smp.update = "e"}, tensor<4x4xf32> {smp.update = "e"}, tensor<4x4xf32> {smp.update = "w1"}, tensor<4x4xf32> {smp.update = "w2"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"})
// PP: smp.matmul %{{.*}}, %[[E0]] {smp.mb = 0 : i64, smp.stage = 0 : i64}
// PP-NEXT: smp.matmul %{{.*}}, %[[W1]] {smp.mb = 0 : i64, smp.stage = 0 : i64}
// PP-NEXT: smp.add {{.*}} {smp.mb = 0 : i64, smp.stage = 0 : i64}
// PP-NEXT: smp.matmul %{{.*}}, %[[W2]] {smp.mb = 0 : i64, smp.stage = 1 : i64}
// PP-NEXT: smp.add {{.*}} {smp.mb = 0 : i64, smp.stage = 1 : i64}
// PP-NEXT: smp.matmul %{{.*}}, %[[E1]] {smp.mb = 0 : i64, smp.stage = 1 : i64, transpose_rhs = true}
// PP: smp.matmul %{{.*}}, %[[E0]] {smp.mb = 1 : i64, smp.stage = 0 : i64}
// PP: smp.matmul %{{.*}}, %[[E1]] {smp.mb = 1 : i64, smp.stage = 1 : i64, transpose_rhs = true}
// The loss and the start of the backward are on the last stage.
// PP: smp.cross_entropy {{.*}} {reduction = #smp<reduction sum>, smp.mb = 0 : i64, smp.stage = 1 : i64}
// PP: smp.cross_entropy_grad {{.*}} {reduction = #smp<reduction sum>, smp.bwd, smp.mb = 0 : i64, smp.stage = 1 : i64}
// PP: smp.matmul %{{.*}}, %[[W1]] {smp.bwd, smp.mb = 0 : i64, smp.stage = 0 : i64, transpose_rhs = true}
// PP: smp.cross_entropy_grad {{.*}} {reduction = #smp<reduction sum>, smp.bwd, smp.mb = 1 : i64, smp.stage = 1 : i64}
// Accumulated over the micro-batches as each gradient is made (backward
// order: the last stage's copy of e, w2, w1, the first stage's copy of e).
// PP: %[[GE1:.*]] = smp.add %{{.*}}, %{{.*}} {smp.bwd, smp.mb = 1 : i64, smp.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// PP: %[[GW2:.*]] = smp.add %{{.*}}, %{{.*}} {smp.bwd, smp.mb = 1 : i64, smp.stage = 1 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// PP: %[[GW1:.*]] = smp.add %{{.*}}, %{{.*}} {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// PP: %[[GE0:.*]] = smp.add %{{.*}}, %{{.*}} {smp.bwd, smp.mb = 1 : i64, smp.stage = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// Summed over the copies, in stage order, on each copy's stage.
// PP-NEXT: %[[SE0:.*]] = smp.add %[[GE0]], %[[GE1]] {smp.stage = 0 : i64}
// PP-NEXT: %[[SE1:.*]] = smp.add %[[GE0]], %[[GE1]] {smp.stage = 1 : i64}
// The norm: a partial sum per stage (e counted once), then over the stages.
// PP-NEXT: smp.mul %[[SE0]], %[[SE0]] {smp.stage = 0 : i64}
// PP-NOT: smp.mul %[[SE1]], %[[SE1]]
// PP: smp.mul %[[GW1]], %[[GW1]] {smp.stage = 0 : i64}
// PP: %[[PART0:.*]] = smp.add %{{.*}}, %{{.*}} {smp.stage = 0 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// PP-NEXT: smp.mul %[[GW2]], %[[GW2]] {smp.stage = 1 : i64}
// PP-NEXT: %[[PART1:.*]] = smp.reduce_sum %{{.*}} {axes = array<i64: 0, 1>, keepdims = false, smp.stage = 1 : i64}
// PP-NEXT: %[[SUMSQ:.*]] = smp.add %[[PART0]], %[[PART1]]
// PP-NEXT: %[[NORM:.*]] = smp.sqrt %[[SUMSQ]]
// PP-NEXT: %[[NEWE0:.*]], %{{.*}} = smp.sgd_update %[[E0]], %[[SE0]], %[[SE0]], {{.*}} {smp.stage = 0 : i64}
// PP-NEXT: %[[NEWE1:.*]], %{{.*}} = smp.sgd_update %[[E1]], %[[SE1]], %[[SE1]], {{.*}} {smp.stage = 1 : i64}
// PP-NEXT: %[[NEWW1:.*]], %{{.*}} = smp.sgd_update %[[W1]], %[[GW1]], %[[GW1]], {{.*}} {smp.stage = 0 : i64}
// PP-NEXT: %[[NEWW2:.*]], %{{.*}} = smp.sgd_update %[[W2]], %[[GW2]], %[[GW2]], {{.*}} {smp.stage = 1 : i64}
// PP-NEXT: return %[[NEWE0]], %[[NEWE1]], %[[NEWW1]], %[[NEWW2]],

// Stages alone (one micro-batch) also unroll the step: the inputs keep
// their size and place, ops get smp.mb = 0, e still gets a copy per stage.
// PP1-LABEL: func.func @train_step
// PP1-SAME: %[[X:[^:]*]]: tensor<2x4xf32> {smp.input = "x"}
// PP1-SAME: {smp.param = "e", smp.stage = 0 : i64}
// PP1-SAME: {smp.param = "e", smp.stage = 1 : i64}
// PP1-SAME: tensor<2xi64> {smp.input = "labels"}
// PP1-NEXT: smp.matmul %[[X]], %{{.*}} {smp.mb = 0 : i64, smp.stage = 0 : i64}
// PP1-NOT: smp.mb = 1
// PP1: smp.cross_entropy_grad {{.*}}smp.bwd, smp.mb = 0 : i64, smp.stage = 1 : i64
// PP1-NOT: smp.mb = 1
// PP1: return

// mse: the target, like the labels, is one input holding every micro-batch,
// sliced per micro-batch; each micro-batch's mean is halved.
// MSE-LABEL: func.func @train_step
// MSE-SAME: %[[X:[^:]*]]: tensor<4x4xf32> {smp.input = "x"}
// MSE-SAME: %[[T:[^:]*]]: tensor<4x4xf32> {smp.input = "target"}
// MSE-NOT: smp.input = "target"
// MSE-SAME: -> (
// MSE: %[[T0:.*]] = smp.slice %[[T]] {limits = array<i64: 2, 4>, {{.*}}starts = array<i64: 0, 0>
// MSE: smp.sub %{{.*}}, %[[T0]] {smp.mb = 0 : i64
// MSE: smp.reduce_mean {{.*}}smp.mb = 0 : i64
// MSE-NEXT: %[[TWO:.*]] = smp.constant dense<2.000000e+00> : tensor<f32>
// MSE-NEXT: smp.div %{{.*}}, %[[TWO]] {smp.mb = 0 : i64
// MSE: %[[T1:.*]] = smp.slice %[[T]] {limits = array<i64: 4, 4>, {{.*}}starts = array<i64: 2, 0>
// MSE: smp.sub %{{.*}}, %[[T1]] {smp.mb = 1 : i64

func.func @main(%x: tensor<2x4xf32> {smp.input = "x"},
                %e: tensor<4x4xf32> {smp.param = "e"},
                %w1: tensor<4x4xf32> {smp.param = "w1"},
                %w2: tensor<4x4xf32> {smp.param = "w2"})
    -> (tensor<2x4xf32> {smp.output = "logits"}) {
  %h0 = smp.matmul %x, %e : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("embed")
  %t1 = smp.matmul %h0, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("l1.mm")
  %r1 = smp.add %h0, %t1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("l1.res")
  %t2 = smp.matmul %r1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("l2.mm")
  %r2 = smp.add %r1, %t2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("l2.res")
  %out = smp.matmul %r2, %e {transpose_rhs = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("head")
  return %out : tensor<2x4xf32>
}
