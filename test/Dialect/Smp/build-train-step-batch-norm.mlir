// Training-mode BatchNormalization in smp-build-train-step
// (lib/Dialect/Smp/Transforms/BatchNormTraining.cpp): batch statistics, the
// running-statistics update, dp synchronisation, replica statistics,
// micro-batches, frozen (running) statistics and f32 statistics of a bf16
// model.
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=sgd})' | FileCheck %s
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=sgd dp=2})' | FileCheck %s --check-prefix=DP
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=sgd dp=2 bn-stats=replica})' | FileCheck %s --check-prefix=REPLICA
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=sgd microbatches=2})' | FileCheck %s --check-prefix=MB
// RUN: smp-opt %s -pass-pipeline='builtin.module(smp-build-train-step{loss=y optimizer=sgd bn-stats=running})' | FileCheck %s --check-prefix=RUNNING
// RUN: smp-opt %s -pass-pipeline='builtin.module(func.func(smp-mixed-precision{precision=bf16}),smp-build-train-step{loss=y optimizer=sgd dp=2})' | FileCheck %s --check-prefix=BF16

// Batch norm in PyTorch's train() mode: the step normalises with the batch's
// mean and biased variance (over every dim but 1: 4 x 2 = 8 values per
// channel), and returns the running statistics updated with momentum 0.1
// (ONNX's 0.9 kept) and the unbiased variance (/ 7); they are updated in
// place, never trained.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:[^:]*]]: tensor<4x3x2xf32> {smp.input = "x"}
// CHECK-SAME: %[[M:[^:]*]]: tensor<3xf32> {smp.param = "bn.running_mean"}
// CHECK-SAME: %[[V:[^:]*]]: tensor<3xf32> {smp.param = "bn.running_var"}
// CHECK-SAME: -> (tensor<1x3x1xf32> {smp.update = "w"}, tensor<3xf32> {smp.update = "bn.weight"}, tensor<3xf32> {smp.update = "bn.bias"}, tensor<3xf32> {smp.update = "bn.running_mean"}, tensor<3xf32> {smp.update = "bn.running_var"}, tensor<f32> {smp.output = "loss"}
// CHECK: %[[XW:.*]] = smp.mul %[[X]]
// CHECK: %[[S1:.*]] = smp.reduce_sum %[[XW]] {axes = array<i64: 0, 2>, keepdims = false} : tensor<4x3x2xf32> -> tensor<3xf32>
// CHECK: %[[N:.*]] = smp.constant dense<8.000000e+00>
// CHECK: %[[MEAN:.*]] = smp.div %[[S1]], %[[N]]
// CHECK: %[[MEANC:.*]] = smp.reshape %[[MEAN]] : tensor<3xf32> -> tensor<1x3x1xf32>
// CHECK: %[[XC:.*]] = smp.sub %[[XW]], %[[MEANC]]
// CHECK: %[[SQ:.*]] = smp.mul %[[XC]], %[[XC]]
// CHECK: %[[S2:.*]] = smp.reduce_sum %[[SQ]] {axes = array<i64: 0, 2>, keepdims = false}
// CHECK: %[[VAR:.*]] = smp.div %[[S2]], %[[N]]
// CHECK: %[[N1:.*]] = smp.constant dense<7.000000e+00>
// CHECK: %[[UNB:.*]] = smp.div %[[S2]], %[[N1]]
// CHECK: %[[KEEP:.*]] = smp.constant dense<0.899999976>
// CHECK: %[[NEW:.*]] = smp.constant dense<0.100000024>
// CHECK: %[[FM:.*]] = smp.mul %[[MEAN]], %[[NEW]]
// CHECK: %[[DM:.*]] = smp.mul %[[M]], %[[KEEP]] {smp.running_stat = "bn.running_mean"}
// CHECK: %[[RM:.*]] = smp.add %[[DM]], %[[FM]]
// CHECK: %[[FV:.*]] = smp.mul %[[UNB]], %{{.*}}
// CHECK: %[[DV:.*]] = smp.mul %[[V]], %{{.*}} {smp.running_stat = "bn.running_var"}
// CHECK: %[[RV:.*]] = smp.add %[[DV]], %[[FV]]
// CHECK: smp.batch_norm %[[XW]], %{{.*}}, %{{.*}}, %[[MEAN]], %[[VAR]] {epsilon{{.*}}smp.running_mean = "bn.running_mean", smp.running_var = "bn.running_var"}
// The gradient flows through the statistics to w.
// CHECK: smp.neg
// CHECK-COUNT-3: smp.sgd_update
// CHECK-NOT: smp.sgd_update
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[RM]], %[[RV]], %{{.*}}, %{{.*}} :

// Data parallel (SyncBatchNorm): both sums over the ranks, 16 values per
// channel in all (unbiased: / 15); the backward sums their gradients over
// the ranks too.
// DP-LABEL: func.func @train_step
// DP: %[[S1:.*]] = smp.reduce_sum
// DP: %[[G1:.*]] = shard.all_reduce %[[S1]] on @dp grid_axes = [0] : tensor<3xf32> -> tensor<3xf32>
// DP: smp.constant dense<1.600000e+01>
// DP: %[[S2:.*]] = smp.reduce_sum
// DP: shard.all_reduce %[[S2]] on @dp
// DP: smp.constant dense<1.500000e+01>
// DP: smp.batch_norm
// DP-COUNT-2: shard.all_reduce %{{.*}} on @dp grid_axes = [0] : tensor<3xf32> -> tensor<3xf32>
// DP: smp.sgd_update

// Per-replica statistics: no sums over the ranks in the forward; the running
// statistics follow dp rank 0's batch statistics (gathered, first slice).
// REPLICA-LABEL: func.func @train_step
// REPLICA-NOT: shard.all_reduce {{.*}} tensor<3xf32> -> tensor<3xf32>
// REPLICA: smp.constant dense<8.000000e+00>
// REPLICA: %[[ALL:.*]] = shard.all_gather %{{.*}} on @dp grid_axes = [0] gather_axis = 0 : tensor<3xf32> -> tensor<6xf32>
// REPLICA: %[[R0:.*]] = smp.slice %[[ALL]] {{.*}}limits = array<i64: 3>
// REPLICA: shard.all_gather
// REPLICA: smp.mul %[[R0]]
// REPLICA: {smp.running_stat = "bn.running_mean"}
// REPLICA: {smp.running_stat = "bn.running_var"}
// REPLICA: smp.batch_norm

// Micro-batches: each micro-batch's statistics; micro-batch 1's update starts
// from micro-batch 0's result (PyTorch running the module once per micro-
// batch), and the last one is returned.
// MB-LABEL: func.func @train_step
// MB: %[[D0:.*]] = smp.mul %{{.*}}, %{{.*}} {smp.mb = 0 : i64, smp.running_stat = "bn.running_mean", smp.stage = 0 : i64}
// MB: %[[U0:.*]] = smp.add %[[D0]], %{{.*}} {smp.mb = 0 : i64
// MB: %[[D1:.*]] = smp.mul %[[U0]], %{{.*}} {smp.mb = 1 : i64, smp.running_stat = "bn.running_mean"
// MB: %[[U1:.*]] = smp.add %[[D1]], %{{.*}} {smp.mb = 1 : i64
// MB: return %{{.*}}, %{{.*}}, %{{.*}}, %[[U1]], %{{.*}}, %{{.*}}, %{{.*}} :

// bf16: the sums, their all_reduce and the statistics are f32 (PyTorch's
// batch norm under autocast keeps them so); the centring and the batch norm
// read them rounded to bf16, the running statistics f32. (Summed in bf16,
// a channel's sum was rounded per rank and again over the ranks: dp 4
// trained a bf16 CNN 12% away from one rank's gradient norm by step 3.)
// BF16-LABEL: func.func @train_step
// BF16: %[[XW:.*]] = smp.mul {{.*}} -> tensor<4x3x2xbf16>
// BF16: %[[X32:.*]] = smp.cast %[[XW]] : tensor<4x3x2xbf16> to tensor<4x3x2xf32>
// BF16: %[[S1:.*]] = smp.reduce_sum %[[X32]] {{.*}} : tensor<4x3x2xf32> -> tensor<3xf32>
// BF16: %[[G1:.*]] = shard.all_reduce %[[S1]] on @dp grid_axes = [0] : tensor<3xf32> -> tensor<3xf32>
// BF16: %[[MEAN:.*]] = smp.div %[[G1]], %{{.*}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// BF16: %[[MEAN16:.*]] = smp.cast %[[MEAN]] : tensor<3xf32> to tensor<3xbf16>
// BF16: %[[MEANC:.*]] = smp.reshape %[[MEAN16]]
// BF16: %[[XC:.*]] = smp.sub %[[XW]], %[[MEANC]] : (tensor<4x3x2xbf16>, tensor<1x3x1xbf16>) -> tensor<4x3x2xbf16>
// BF16: %[[SQ:.*]] = smp.mul %[[XC]], %[[XC]]
// BF16: %[[SQ32:.*]] = smp.cast %[[SQ]] : tensor<4x3x2xbf16> to tensor<4x3x2xf32>
// BF16: %[[S2:.*]] = smp.reduce_sum %[[SQ32]]
// BF16: shard.all_reduce %[[S2]] on @dp grid_axes = [0] : tensor<3xf32> -> tensor<3xf32>
// BF16: smp.mul %[[MEAN]], %{{.*}} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// BF16: smp.batch_norm %[[XW]], %{{.*}}, %{{.*}}, %[[MEAN16]], %{{.*}} {epsilon = {{.*}}} : (tensor<4x3x2xbf16>, tensor<3xbf16>, tensor<3xbf16>, tensor<3xbf16>, tensor<3xbf16>)

// bn-stats=running: the running statistics normalise and stay as they are.
// RUNNING-LABEL: func.func @train_step
// RUNNING-SAME: %[[M:[^:]*]]: tensor<3xf32> {smp.param = "bn.running_mean"}
// RUNNING-SAME: %[[V:[^:]*]]: tensor<3xf32> {smp.param = "bn.running_var"}
// RUNNING-NOT: smp.running_stat
// RUNNING: smp.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %[[M]], %[[V]]
// RUNNING-NOT: smp.update = "bn.running
func.func @main(%x: tensor<4x3x2xf32> {smp.input = "x"},
                %w: tensor<1x3x1xf32> {smp.param = "w"},
                %s: tensor<3xf32> {smp.param = "bn.weight"},
                %b: tensor<3xf32> {smp.param = "bn.bias"},
                %m: tensor<3xf32> {smp.param = "bn.running_mean"},
                %v: tensor<3xf32> {smp.param = "bn.running_var"})
    -> (tensor<f32> {smp.output = "y"}) {
  %xw = smp.mul %x, %w : (tensor<4x3x2xf32>, tensor<1x3x1xf32>) -> tensor<4x3x2xf32>
  %0 = smp.batch_norm %xw, %s, %b, %m, %v {epsilon = 1.0e-5 : f32} : (tensor<4x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<4x3x2xf32>
  %1 = smp.mul %0, %0 : (tensor<4x3x2xf32>, tensor<4x3x2xf32>) -> tensor<4x3x2xf32>
  %2 = smp.reduce_sum %1 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<4x3x2xf32> -> tensor<f32>
  return %2 : tensor<f32>
}
