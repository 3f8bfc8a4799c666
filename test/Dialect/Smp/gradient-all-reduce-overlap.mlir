// RUN: smp-opt %s -split-input-file '--smp-gradient-all-reduce=bucket-mb=0.0000153' | FileCheck %s
// RUN: smp-opt %s -split-input-file '--smp-gradient-all-reduce=bucket-mb=0.0000153' | FileCheck %s --check-prefix=SPLIT

// Two buckets of two gradients (16 bytes a bucket): each bucket's
// concatenation and all-reduce follow its last gradient and the backward
// goes on after it; both splits come at the end, so that nothing between
// reads a bucket's buffer and a backend runs the all-reduces beside the
// rest of the backward (runtime/exec's communication lane). The
// all-reduce takes its input's storage (smp::inPlaceOperand): the bucket
// is one buffer from its concatenation to its split.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G1:.*]] = smp.mul %arg1, %arg1
// CHECK: %[[G2:.*]] = smp.mul %[[G1]], %arg2
// CHECK: %[[CAT1:.*]] = smp.concat
// CHECK: %[[SUM1:.*]] = shard.all_reduce %[[CAT1]] on @dp
// CHECK: %[[G3:.*]] = smp.mul %[[G2]], %arg3
// CHECK: %[[G4:.*]] = smp.mul %[[G3]], %arg4
// CHECK: %[[CAT2:.*]] = smp.concat
// CHECK: %[[SUM2:.*]] = shard.all_reduce %[[CAT2]] on @dp
// CHECK-NOT: smp.mul
// CHECK: smp.slice %[[SUM1]] {limits = array<i64: 2>, smp.view, starts = array<i64: 0>
// CHECK: smp.slice %[[SUM1]] {limits = array<i64: 4>, smp.view, starts = array<i64: 2>
// CHECK: smp.slice %[[SUM2]] {limits = array<i64: 2>, smp.view, starts = array<i64: 0>
// CHECK: smp.slice %[[SUM2]] {limits = array<i64: 4>, smp.view, starts = array<i64: 2>
// CHECK: shard.all_reduce %arg0 on @dp
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%loss: tensor<f32>,
                        %a: tensor<2xf32> {smp.param = "a"},
                        %b: tensor<2xf32> {smp.param = "b"},
                        %c: tensor<2xf32> {smp.param = "c"},
                        %d: tensor<2xf32> {smp.param = "d"})
      -> (tensor<2xf32> {smp.grad_of = 1 : i64}, tensor<2xf32> {smp.grad_of = 2 : i64},
          tensor<2xf32> {smp.grad_of = 3 : i64}, tensor<2xf32> {smp.grad_of = 4 : i64},
          tensor<f32> {smp.output = "loss"}) {
    %0 = smp.mul %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %1 = smp.mul %0, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %2 = smp.mul %1, %c : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %3 = smp.mul %2, %d : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %0, %1, %2, %3, %loss : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>
  }
}

// -----

// Under a pipeline (the gradients marked with their stage, micro-batch
// and backward: the last micro-batch's sums), a bucket's ops take its last
// gradient's marks, so smp-pipeline-schedule runs them in that micro-batch's
// backward rather than in the epilogue after the whole schedule.
// SPLIT-LABEL: func.func @train_step
// SPLIT: %[[G2:.*]] = smp.mul {{.*}} {smp.bwd, smp.mb = 3 : i64, smp.stage = 0 : i64}
// SPLIT: smp.concat %{{.*}}, %{{.*}} {axis = 0 : i64, smp.bwd, smp.mb = 3 : i64, smp.stage = 0 : i64}
// SPLIT: shard.all_reduce {{.*}} on @dp {{.*}} {smp.bwd, smp.mb = 3 : i64, smp.stage = 0 : i64}
// SPLIT: %[[G3:.*]] = smp.mul {{.*}} {smp.bwd, smp.mb = 3 : i64, smp.stage = 0 : i64}
module {
  shard.grid @dp(shape = 2)
  func.func @train_step(%loss: tensor<f32>,
                        %a: tensor<2xf32> {smp.param = "a", smp.stage = 0 : i64},
                        %b: tensor<2xf32> {smp.param = "b", smp.stage = 0 : i64},
                        %c: tensor<2xf32> {smp.param = "c", smp.stage = 0 : i64})
      -> (tensor<2xf32> {smp.grad_of = 1 : i64}, tensor<2xf32> {smp.grad_of = 2 : i64},
          tensor<2xf32> {smp.grad_of = 3 : i64}, tensor<f32> {smp.output = "loss"}) {
    %0 = smp.mul %a, %a {smp.bwd, smp.mb = 3 : i64, smp.stage = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %1 = smp.mul %0, %b {smp.bwd, smp.mb = 3 : i64, smp.stage = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %2 = smp.mul %1, %c {smp.bwd, smp.mb = 3 : i64, smp.stage = 0 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %0, %1, %2, %loss : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>
  }
}
