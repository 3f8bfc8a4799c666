// RUN: smp-opt %s --smp-pipeline-split=stages=2 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' '--smp-pipeline-schedule=pp=2 schedule=gpipe' | FileCheck %s --check-prefixes=CHECK,GPIPE
// RUN: smp-opt %s --smp-pipeline-split=stages=2 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' '--smp-pipeline-schedule=pp=2 schedule=1f1b' | FileCheck %s --check-prefixes=CHECK,1F1B
// RUN: smp-opt %s --smp-pipeline-split=stages=2 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' '--smp-pipeline-schedule=pp=2 schedule=zb-h1' | FileCheck %s --check-prefixes=CHECK,ZB
// RUN: smp-opt %s --smp-pipeline-split=stages=4 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' '--smp-pipeline-schedule=pp=2 schedule=interleaved' | FileCheck %s --check-prefix=INTER
// Every pair of ranks exchanges its messages in one order (each rank's
// sends to a peer in the order the peer receives them), for every
// schedule: NCCL matches messages in queue order, not by tag.
// RUN: for s in gpipe 1f1b zb-h1; do \
// RUN:   smp-opt %s --smp-pipeline-split=stages=2 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' "--smp-pipeline-schedule=pp=2 schedule=$s" -o %t.$s.mlir && \
// RUN:   %python %S/../../train/pair_order.py %t.$s.mlir; done | FileCheck %s --check-prefix=ORDER
// RUN: smp-opt %s --smp-pipeline-split=stages=4 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' '--smp-pipeline-schedule=pp=2 schedule=interleaved' -o %t.inter.mlir
// RUN: %python %S/../../train/pair_order.py %t.inter.mlir | FileCheck %s --check-prefix=ORDER
// ORDER: 2 pairs, {{[0-9]+}} messages, in order
// ORDER-NOT: ranks
// RUN: smp-opt %s --smp-pipeline-split=stages=2 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=4' '--smp-pipeline-schedule=pp=2 schedule=gpipe' | FileCheck %s --check-prefix=GPIPE4
// RUN: smp-opt %s --smp-pipeline-split=stages=2 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=4' '--smp-pipeline-schedule=pp=2 schedule=1f1b' | FileCheck %s --check-prefix=1F1B4
// RUN: smp-opt %s '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' '--smp-pipeline-schedule=pp=1' | FileCheck %s --check-prefix=ONE

// The model: embedding e (stage 0), a residual layer w1 (stage 0), a
// residual layer w2 (stage 1) and a head tied to e (stage 1). Stage S runs
// on rank S % pp. Message tags number the values in @train_step's order, so
// they are the same for every schedule:
//   0, 1  stage 0's output of micro-batch 0, 1 (rank 0 -> 1)
//   2, 5  the gradient of that output, micro-batch 0, 1 (rank 1 -> 0)
//   3     the loss (rank 1 -> 0)
//   4, 6  e's gradient summed over the micro-batches on stage 1 and 0 (each
//         micro-batch's gradient is added as soon as it is made, so stage
//         1's sum is complete first): each rank adds both, stage 0's first
//   7     stage 1's partial sum of squared gradients (rank 1 -> 0)
//   8     the gradient norm (rank 0 -> 1)

// CHECK-LABEL: module attributes
// GPIPE-SAME: smp.schedule = "gpipe pp=2 microbatches=2 virtual-stages=1 (simulated bubble 33.3%)"
// 1F1B-SAME: smp.schedule = "1f1b pp=2 microbatches=2 virtual-stages=1 (simulated bubble 33.3%)"
// ZB-SAME: smp.schedule = "zb-h1 pp=2 microbatches=2 virtual-stages=1 (simulated bubble 14.3%)"
// CHECK-NOT: func.func @train_step(

// Rank 0: e's and w1's updates, the inputs, no labels.
// CHECK-LABEL: func.func @train_step_pp0(
// CHECK-SAME: %[[E:[^:]*]]: tensor<4x4xf32> {smp.param = "e"}, %[[W1:[^:]*]]: tensor<4x4xf32> {smp.param = "w1"}, %[[X:[^:]*]]: tensor<4x4xf32> {smp.input = "x"}, %[[LR:[^:]*]]: tensor<f32> {smp.input = "@lr"}, %[[STEP:[^:]*]]: tensor<f32> {smp.input = "@step"})
// CHECK-SAME: -> (tensor<4x4xf32> {smp.update = "e"}, tensor<4x4xf32> {smp.update = "w1"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"}) attributes {smp.pp_rank = 0 : i64}
// CHECK-NEXT: %[[X0:.*]] = smp.slice %[[X]] {limits = array<i64: 2, 4>, starts = array<i64: 0, 0>
// CHECK-NEXT: %[[X1:.*]] = smp.slice %[[X]] {limits = array<i64: 4, 4>, starts = array<i64: 2, 0>
// CHECK-NEXT: %[[H0:.*]] = smp.matmul %[[X0]], %[[E]] :
// CHECK-NEXT: smp.matmul %[[H0]], %[[W1]] :
// CHECK-NEXT: %[[A0:.*]] = smp.add
// CHECK-NEXT: smp.send %[[A0]] to 1 tag 0 : tensor<2x4xf32>
// CHECK-NEXT: %[[H1:.*]] = smp.matmul %[[X1]], %[[E]] :
// CHECK-NEXT: smp.matmul %[[H1]], %[[W1]] :
// CHECK-NEXT: %[[A1:.*]] = smp.add
// CHECK-NEXT: smp.send %[[A1]] to 1 tag 1 : tensor<2x4xf32>
// CHECK-NEXT: %[[G0:.*]] = smp.recv from 1 tag 2 : tensor<2x4xf32>
// CHECK-NEXT: smp.matmul %[[G0]], %[[W1]] {transpose_rhs = true}
// CHECK: %[[G1:.*]] = smp.recv from 1 tag 5 : tensor<2x4xf32>
// CHECK-NEXT: smp.matmul %[[G1]], %[[W1]] {transpose_rhs = true}
// CHECK-NEXT: %[[GW1B:.*]] = smp.matmul %{{.*}}, %[[G1]] {transpose_lhs = true}
// CHECK-NEXT: %[[GW1:.*]] = smp.add %{{.*}}, %[[GW1B]] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK: %[[GE0:.*]] = smp.add %{{.*}}, %{{.*}} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: smp.send %[[GE0]] to 1 tag 6 : tensor<4x4xf32>
// CHECK-NEXT: %[[GE1:.*]] = smp.recv from 1 tag 4 : tensor<4x4xf32>
// CHECK-NEXT: %[[GE:.*]] = smp.add %[[GE0]], %[[GE1]]
// CHECK: %[[SQ1:.*]] = smp.recv from 1 tag 7 : tensor<f32>
// CHECK-NEXT: %[[SUMSQ:.*]] = smp.add %{{.*}}, %[[SQ1]]
// CHECK-NEXT: %[[NORM:.*]] = smp.sqrt %[[SUMSQ]]
// CHECK-NEXT: smp.send %[[NORM]] to 1 tag 8 : tensor<f32>
// CHECK-NEXT: %[[NEWE:.*]], %{{.*}} = smp.sgd_update %[[E]], %[[GE]], %[[GE]], %[[LR]], %[[STEP]]
// CHECK-NEXT: %[[NEWW1:.*]], %{{.*}} = smp.sgd_update %[[W1]], %[[GW1]], %[[GW1]], %[[LR]], %[[STEP]]
// CHECK-NEXT: %[[LOSS:.*]] = smp.recv from 1 tag 3 : tensor<f32>
// CHECK-NEXT: return %[[NEWE]], %[[NEWW1]], %[[LOSS]], %[[NORM]]
// CHECK-NEXT: }

// Rank 1: w2's and its copy of e's updates, the labels, no x. The label
// count (no stage: computed on the inputs only) is recomputed here, first.
// CHECK-LABEL: func.func @train_step_pp1(
// CHECK-SAME: %[[W2:[^:]*]]: tensor<4x4xf32> {smp.param = "w2"}, %[[E1:[^:]*]]: tensor<4x4xf32> {smp.param = "e"}, %[[Y:[^:]*]]: tensor<4xi64> {smp.input = "labels"}, %{{[^:]*}}: tensor<f32> {smp.input = "@lr"}, %{{[^:]*}}: tensor<f32> {smp.input = "@step"})
// CHECK-SAME: -> (tensor<4x4xf32> {smp.update = "e"}, tensor<4x4xf32> {smp.update = "w2"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"}) attributes {smp.pp_rank = 1 : i64}
// CHECK: smp.equal %[[Y]]
// CHECK: %[[R0:.*]] = smp.recv from 0 tag 0 : tensor<2x4xf32>
// CHECK-NEXT: smp.matmul %[[R0]], %[[W2]] :

// GPipe: both forwards, then both backwards.
// GPIPE: %[[R1:.*]] = smp.recv from 0 tag 1 : tensor<2x4xf32>
// GPIPE: smp.send %{{.*}} to 0 tag 2 : tensor<2x4xf32>
// GPIPE: smp.send %{{.*}} to 0 tag 5 : tensor<2x4xf32>
// With 1F1B, micro-batch 0's backward (its gradient sent) comes before
// micro-batch 1's forward (its input received).
// 1F1B: smp.send %{{.*}} to 0 tag 2 : tensor<2x4xf32>
// 1F1B-NEXT: %[[R1:.*]] = smp.recv from 0 tag 1 : tensor<2x4xf32>
// 1F1B: smp.send %{{.*}} to 0 tag 5 : tensor<2x4xf32>
// ZB-H1 is as 1F1B, but each backward only computes the input gradient that
// rank 0 waits for (no weight-gradient matmul, transpose_lhs, before it is
// sent); the weight gradients of both micro-batches come after.
// ZB-NOT: transpose_lhs
// ZB: smp.send %{{.*}} to 0 tag 2 : tensor<2x4xf32>
// ZB-NEXT: %[[R1:.*]] = smp.recv from 0 tag 1 : tensor<2x4xf32>
// ZB-NOT: transpose_lhs
// ZB: smp.send %{{.*}} to 0 tag 5 : tensor<2x4xf32>
// ZB-COUNT-3: smp.matmul {{.*}} {transpose_lhs = true}

// CHECK: smp.send %[[GE1:[0-9]+]] to 0 tag 4 : tensor<4x4xf32>
// ZB-NEXT: smp.matmul {{.*}} {transpose_lhs = true}
// CHECK: %[[GE0:.*]] = smp.recv from 0 tag 6 : tensor<4x4xf32>
// CHECK-NEXT: %[[GE:.*]] = smp.add %[[GE0]], %[[GE1]]
// CHECK-NEXT: smp.mul %[[GW2:[0-9]+]], %[[GW2]]
// CHECK-NEXT: %[[SQ1:.*]] = smp.reduce_sum
// CHECK-NEXT: smp.send %[[SQ1]] to 0 tag 7 : tensor<f32>
// The loss partial goes out last: rank 0 receives it last, and the two
// ranks' messages must go in one order (NCCL has no tags).
// CHECK-NEXT: smp.send %{{.*}} to 0 tag 3 : tensor<f32>
// CHECK-NEXT: %[[NEWE:.*]], %{{.*}} = smp.sgd_update %[[E1]], %[[GE]], %[[GE]]
// CHECK-NEXT: %[[NEWW2:.*]], %{{.*}} = smp.sgd_update %[[W2]], %[[GW2]], %[[GW2]]
// CHECK-NEXT: %[[NORM:.*]] = smp.recv from 0 tag 8 : tensor<f32>
// CHECK-NEXT: return %[[NEWE]], %[[NEWW2]], %{{.*}}, %[[NORM]]
// CHECK-NEXT: }

// Four micro-batches: GPipe runs all forwards on rank 0 before the first
// backward's gradient arrives (tags 0-3 stage 0's outputs, 4-6 and 9 their
// gradients, 7 the loss, 8 the last stage's sum of e's gradients); 1F1B
// starts the first backward after pp=2 forwards.
// GPIPE4-LABEL: func.func @train_step_pp0(
// GPIPE4: smp.send %{{.*}} to 1 tag 0 : tensor<2x4xf32>
// GPIPE4-NOT: smp.recv
// GPIPE4: smp.send %{{.*}} to 1 tag 1 : tensor<2x4xf32>
// GPIPE4-NOT: smp.recv
// GPIPE4: smp.send %{{.*}} to 1 tag 2 : tensor<2x4xf32>
// GPIPE4-NOT: smp.recv
// GPIPE4: smp.send %{{.*}} to 1 tag 3 : tensor<2x4xf32>
// GPIPE4: smp.recv from 1 tag 4 : tensor<2x4xf32>
// GPIPE4: smp.recv from 1 tag 5 : tensor<2x4xf32>
// GPIPE4: smp.recv from 1 tag 6 : tensor<2x4xf32>
// GPIPE4: smp.recv from 1 tag 9 : tensor<2x4xf32>
// GPIPE4-LABEL: func.func @train_step_pp1(
// GPIPE4: smp.recv from 0 tag 0
// GPIPE4-NOT: smp.send
// GPIPE4: smp.recv from 0 tag 3
// GPIPE4: smp.send %{{.*}} to 0 tag 4

// 1F1B4-LABEL: func.func @train_step_pp0(
// 1F1B4: smp.send %{{.*}} to 1 tag 0 : tensor<2x4xf32>
// 1F1B4: smp.send %{{.*}} to 1 tag 1 : tensor<2x4xf32>
// 1F1B4-NOT: smp.send
// 1F1B4: smp.recv from 1 tag 4 : tensor<2x4xf32>
// 1F1B4-NOT: smp.recv
// 1F1B4: smp.send %{{.*}} to 1 tag 2 : tensor<2x4xf32>
// 1F1B4-NOT: smp.send
// 1F1B4: smp.recv from 1 tag 5 : tensor<2x4xf32>
// 1F1B4-NOT: smp.recv
// 1F1B4: smp.send %{{.*}} to 1 tag 3 : tensor<2x4xf32>
// 1F1B4: smp.recv from 1 tag 6 : tensor<2x4xf32>
// 1F1B4: smp.recv from 1 tag 9 : tensor<2x4xf32>
// 1F1B4-LABEL: func.func @train_step_pp1(
// 1F1B4: smp.recv from 0 tag 0
// 1F1B4-NOT: smp.recv
// 1F1B4: smp.send %{{.*}} to 0 tag 4
// 1F1B4-NEXT: smp.recv from 0 tag 1

// Interleaved, 4 stages on 2 ranks: rank 0 runs stages 0 (e) and 2 (w2),
// rank 1 stages 1 (w1) and 3 (the head, e's copy). Both micro-batches go
// through stage 0, then through stage 2 as their stage-1 outputs come back;
// backwards in the reverse order of the chunks.
// INTER: smp.schedule = "interleaved pp=2 microbatches=2 virtual-stages=2 (simulated bubble 20.0%)"
// INTER-SAME: smp.stage_costs = array<f64: 1.920000e+02, 2.960000e+02, 2.960000e+02, 1.920000e+02>
// INTER-LABEL: func.func @train_step_pp0(
// INTER-SAME: {smp.param = "e"}, %{{[^:]*}}: tensor<4x4xf32> {smp.param = "w2"}, %{{[^:]*}}: tensor<4x4xf32> {smp.input = "x"}
// INTER-SAME: -> (tensor<4x4xf32> {smp.update = "e"}, tensor<4x4xf32> {smp.update = "w2"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"}) attributes {smp.pp_rank = 0 : i64}
// INTER: smp.send %{{.*}} to 1 tag 0 : tensor<2x4xf32>
// INTER-NEXT: smp.matmul
// INTER-NEXT: smp.send %{{.*}} to 1 tag 3 : tensor<2x4xf32>
// INTER-NEXT: smp.recv from 1 tag 1 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 1 tag 2 : tensor<2x4xf32>
// INTER-NEXT: smp.recv from 1 tag 4 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 1 tag 5 : tensor<2x4xf32>
// INTER-NEXT: smp.recv from 1 tag 6 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 1 tag 7 : tensor<2x4xf32>
// INTER-NEXT: smp.recv from 1 tag 10 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 1 tag 12 : tensor<2x4xf32>
// INTER: smp.recv from 1 tag 8 : tensor<2x4xf32>
// INTER: smp.recv from 1 tag 13 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 1 tag 14 : tensor<4x4xf32>
// INTER-NEXT: smp.recv from 1 tag 11 : tensor<4x4xf32>
// INTER: smp.recv from 1 tag 15 : tensor<f32>
// INTER: smp.send %{{.*}} to 1 tag 16 : tensor<f32>
// INTER: smp.recv from 1 tag 9 : tensor<f32>
// INTER-NEXT: return
// INTER-LABEL: func.func @train_step_pp1(
// INTER-SAME: {smp.param = "w1"}, %{{[^:]*}}: tensor<4x4xf32> {smp.param = "e"}, %{{[^:]*}}: tensor<4xi64> {smp.input = "labels"}
// INTER-SAME: -> (tensor<4x4xf32> {smp.update = "e"}, tensor<4x4xf32> {smp.update = "w1"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"}) attributes {smp.pp_rank = 1 : i64}
// INTER: smp.recv from 0 tag 0 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 0 tag 1 : tensor<2x4xf32>
// INTER-NEXT: smp.recv from 0 tag 3 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 0 tag 4 : tensor<2x4xf32>
// INTER-NEXT: smp.recv from 0 tag 2 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 0 tag 6 : tensor<2x4xf32>
// INTER: smp.recv from 0 tag 5 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 0 tag 10 : tensor<2x4xf32>
// INTER: smp.recv from 0 tag 7 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 0 tag 8 : tensor<2x4xf32>
// INTER-NEXT: smp.recv from 0 tag 12 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 0 tag 13 : tensor<2x4xf32>
// INTER: smp.send %{{.*}} to 0 tag 11 : tensor<4x4xf32>
// INTER: smp.recv from 0 tag 14 : tensor<4x4xf32>
// INTER: smp.send %{{.*}} to 0 tag 15 : tensor<f32>
// INTER-NEXT: smp.send %{{.*}} to 0 tag 9 : tensor<f32>
// INTER: smp.recv from 0 tag 16 : tensor<f32>
// INTER-NEXT: return

// One pipeline rank (gradient accumulation): one function, no messages,
// every update.
// ONE: smp.schedule = "1f1b pp=1 microbatches=2 virtual-stages=1 (simulated bubble 0.0%)"
// ONE-LABEL: func.func @train_step_pp0(
// ONE-SAME: -> (tensor<4x4xf32> {smp.update = "e"}, tensor<4x4xf32> {smp.update = "w1"}, tensor<4x4xf32> {smp.update = "w2"}, tensor<f32> {smp.output = "loss"}, tensor<f32> {smp.output = "grad_norm"}) attributes {smp.pp_rank = 0 : i64}
// ONE-NOT: smp.send
// ONE-NOT: smp.recv
// ONE-NOT: func.func @train_step
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
