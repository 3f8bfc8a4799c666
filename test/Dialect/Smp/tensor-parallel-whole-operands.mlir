// RUN: smp-opt %s --smp-tensor-parallel=tp=2 | FileCheck %s
// RUN: smp-opt %s --smp-tensor-parallel=tp=2 '--smp-build-train-step=loss=mse:y:target' | FileCheck %s --check-prefix=GRAD

// An MLP whose hidden units are split over tp while some operands are read
// whole by every rank: a per-row gate computed by another Linear ([2, 1],
// broadcast over the hidden units), a learnable scalar and a constant. Each
// rank's gradient of a whole operand covers only its hidden units, so the
// gate and the scalar enter through smp.tp_copy (its gradient sums the
// ranks'); the constant and the mask from the comparison (ELU's
// `where(x > 0, ...)`) need none. The comparison is split like the values
// it compares.
// CHECK: func.func @main(%[[X:[^:]*]]: tensor<2x8xf32> {smp.input = "x"}
// CHECK-SAME: %[[WG:[^:]*]]: tensor<8x1xf32> {smp.param = "wg"}
// CHECK-SAME: %[[S:[^:]*]]: tensor<1xf32> {smp.param = "scale"}
// CHECK-DAG: %[[SC:.*]] = smp.tp_copy %[[S]] : tensor<1xf32>
// CHECK-DAG: %[[XC:.*]] = smp.tp_copy %[[X]] : tensor<2x8xf32>
// CHECK: %[[H:.*]] = smp.matmul %[[XC]], %{{.*}} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[POS:.*]] = smp.greater %[[H]], %{{.*}} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1>
// CHECK: %[[E:.*]] = smp.where %[[POS]], %[[H]], %{{.*}} : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[G:.*]] = smp.sigmoid
// CHECK: %[[GC:.*]] = smp.tp_copy %[[G]] : tensor<2x1xf32>
// CHECK: %[[M:.*]] = smp.mul %[[E]], %[[GC]] : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
// CHECK: smp.mul %[[M]], %[[SC]] : (tensor<2x8xf32>, tensor<1xf32>) -> tensor<2x8xf32>
// CHECK: %[[PART:.*]] = smp.matmul %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK: shard.all_reduce %[[PART]] on @tp

// The gate's and the scalar's gradients are summed over the ranks (the
// tp_copy's gradient), and the input's is not (x takes none).
// GRAD-LABEL: func.func @train_step
// GRAD: shard.all_reduce %{{.*}} on @tp grid_axes = [0] : tensor<2x4xf32>
// GRAD-DAG: shard.all_reduce %{{.*}} on @tp grid_axes = [0] : tensor<1xf32>
// GRAD-DAG: shard.all_reduce %{{.*}} on @tp grid_axes = [0] : tensor<2x1xf32>
// GRAD-NOT: shard.all_reduce %{{.*}} : tensor<2x8xf32>
// GRAD: smp.sgd_update

func.func @main(%x: tensor<2x8xf32> {smp.input = "x"},
                %w1: tensor<8x16xf32> {smp.param = "w1"},
                %wg: tensor<8x1xf32> {smp.param = "wg"},
                %s: tensor<1xf32> {smp.param = "scale"},
                %w2: tensor<16x4xf32> {smp.param = "w2"})
    -> (tensor<2x4xf32> {smp.output = "y"}) {
  %zero = smp.constant dense<0.0> : tensor<f32>
  %half = smp.constant dense<0.5> : tensor<f32>
  %h = smp.matmul %x, %w1 : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  %pos = smp.greater %h, %zero : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xi1>
  %ex = smp.exp %h : tensor<2x16xf32>
  %neg = smp.mul %ex, %half : (tensor<2x16xf32>, tensor<f32>) -> tensor<2x16xf32>
  %e = smp.where %pos, %h, %neg : (tensor<2x16xi1>, tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %gl = smp.matmul %x, %wg : (tensor<2x8xf32>, tensor<8x1xf32>) -> tensor<2x1xf32>
  %g = smp.sigmoid %gl : tensor<2x1xf32>
  %m = smp.mul %e, %g : (tensor<2x16xf32>, tensor<2x1xf32>) -> tensor<2x16xf32>
  %ms = smp.mul %m, %s : (tensor<2x16xf32>, tensor<1xf32>) -> tensor<2x16xf32>
  %y = smp.matmul %ms, %w2 : (tensor<2x16xf32>, tensor<16x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}
