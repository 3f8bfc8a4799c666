// RUN: not smp-opt %s --smp-pipeline-schedule=pp=2 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: not smp-opt %s --smp-pipeline-split=stages=2 --smp-build-train-step=loss=cross_entropy:logits:labels '--smp-pipeline-schedule=pp=2 schedule=pipedream' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not smp-opt %s --smp-pipeline-split=stages=3 --smp-build-train-step=loss=cross_entropy:logits:labels '--smp-pipeline-schedule=pp=2 schedule=1f1b' 2>&1 | FileCheck %s --check-prefix=MULTIPLE
// RUN: not smp-opt %s --smp-pipeline-split=stages=3 --smp-build-train-step=loss=cross_entropy:logits:labels '--smp-pipeline-schedule=pp=2 schedule=interleaved' 2>&1 | FileCheck %s --check-prefix=MULTIPLE
// RUN: not smp-opt %s --smp-pipeline-split=stages=4 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' '--smp-pipeline-schedule=pp=2 schedule=1f1b' 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// RUN: not smp-opt %s --smp-pipeline-split=stages=4 '--smp-build-train-step=loss=cross_entropy:logits:labels microbatches=2' '--smp-pipeline-schedule=pp=2 schedule=zb-h1' 2>&1 | FileCheck %s --check-prefix=VIRTUAL-ZB
// RUN: not smp-opt %s --smp-pipeline-split=stages=2 --smp-build-train-step=loss=cross_entropy:logits:labels --smp-pipeline-schedule=pp=0 2>&1 | FileCheck %s --check-prefix=ZERO

// NOSTEP: error: smp-pipeline-schedule: no func @train_step (run smp-build-train-step first)
// UNKNOWN: error: unknown pipeline schedule 'pipedream' (expected gpipe, 1f1b, interleaved or zb-h1)
// MULTIPLE: error: cannot run 3 pipeline stages on 2 pipeline ranks (the stages must be a multiple of pp)
// VIRTUAL: error: 4 stages on 2 pipeline ranks need the interleaved schedule (2 virtual stages per rank)
// VIRTUAL-ZB: error: 4 stages on 2 pipeline ranks need the interleaved schedule (2 virtual stages per rank)
// ZERO: error: pp must be >= 1, got 0{{$}}
func.func @main(%x: tensor<2x4xf32> {smp.input = "x"},
                %e: tensor<4x4xf32> {smp.param = "e"},
                %w1: tensor<4x4xf32> {smp.param = "w1"},
                %w2: tensor<4x4xf32> {smp.param = "w2"})
    -> (tensor<2x4xf32> {smp.output = "logits"}) {
  %h0 = smp.matmul %x, %e : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t1 = smp.matmul %h0, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r1 = smp.add %h0, %t1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %t2 = smp.matmul %r1, %w2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %r2 = smp.add %r1, %t2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %out = smp.matmul %r2, %e {transpose_rhs = true} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %out : tensor<2x4xf32>
}
