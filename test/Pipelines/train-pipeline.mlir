// RUN: smp-opt %s '--smp-train-pipeline=loss=cross_entropy:logits:labels optimizer=adamw dp=2 tp=2 zero-stage=1' | FileCheck %s
// RUN: smp-opt %s '--smp-train-pipeline=loss=cross_entropy:logits:labels pp=2 microbatches=2 schedule=gpipe precision=bf16' | FileCheck %s --check-prefix=PP
// RUN: smp-opt %s '--smp-train-pipeline=loss=cross_entropy:logits:labels precision=fp16 loss-scaling=true init-scale=8.0' | FileCheck %s --check-prefix=FP16

// smp-train-pipeline is the pipeline smpc compile --train runs, from the
// same typed plan (smp::buildTrainingPipeline): tensor parallelism (the MLP
// column- then row-parallel, the LM head split by vocabulary for the
// cross-entropy's logits), then the training step over dp with ZeRO-1.
// CHECK-DAG: shard.grid @tp(shape = 2)
// CHECK-DAG: shard.grid @dp(shape = 2)
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<8x2xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "w1"}
// CHECK-SAME: tensor<2x8xf32> {smp.layout = #smp.layout<tp = split(dim = 0)>, smp.param = "w2"}
// CHECK-SAME: tensor<8x8xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "head"}
// CHECK-SAME: {smp.output = "loss"}
// CHECK: shard.reduce_scatter
// CHECK: smp.adam_update
// CHECK: shard.all_gather

// Two pipeline ranks, each its own function after the schedule, computing
// in bf16.
// PP-LABEL: func.func @train_step_pp0
// PP-SAME: smp.pp_rank = 0
// PP: smp.cast {{.*}} to tensor<{{.*}}bf16>
// PP-LABEL: func.func @train_step_pp1
// PP-SAME: smp.pp_rank = 1

// fp16 with dynamic loss scaling: the scale is a state, starting at 8.
// FP16-LABEL: func.func @train_step
// FP16-SAME: tensor<f32> {smp.init = 8.000000e+00 : f32, smp.state = "@loss_scale"}
// FP16: {smp.output = "skipped"}
func.func @main(%x: tensor<2x8xf32> {smp.input = "x"},
                %w1: tensor<8x4xf32> {smp.param = "w1"},
                %w2: tensor<4x8xf32> {smp.param = "w2"},
                %h: tensor<8x16xf32> {smp.param = "head"})
    -> (tensor<2x16xf32> {smp.output = "logits"}) {
  %0 = smp.matmul %x, %w1 : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %1 = smp.relu %0 : tensor<2x4xf32>
  %2 = smp.matmul %1, %w2 : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %3 = smp.matmul %2, %h : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  return %3 : tensor<2x16xf32>
}
