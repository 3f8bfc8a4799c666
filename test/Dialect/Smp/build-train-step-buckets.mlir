// RUN: smp-opt %s '--smp-build-train-step=loss=mse:y:target dp=2' | FileCheck %s
// RUN: smp-opt %s '--smp-build-train-step=loss=mse:y:target dp=2 bucket-mb=0.0001' | FileCheck %s --check-prefix=SMALL
// RUN: smp-opt %s '--smp-build-train-step=loss=mse:y:target dp=2 bucket-mb=0' | FileCheck %s --check-prefix=NONE

// Data-parallel gradients are all-reduced in buckets, in the order the
// backward produces them (w2 before w1), each bucket right after its last
// gradient. The weight transposes the importer hoists to the top are sunk
// to their users first, so w2's gradient is complete before w1's backward.

// Default (25 MiB): one bucket holding both gradients, flattened and
// concatenated (w2's first), all-reduced once and split back.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[G2:.*]] = smp.transpose %{{[0-9]+}} {{.*}} : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK: %[[G1:.*]] = smp.transpose %{{[0-9]+}} {{.*}} : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK: %[[F2:.*]] = smp.reshape %[[G2]] : tensor<4x8xf32> -> tensor<32xf32>
// CHECK: %[[F1:.*]] = smp.reshape %[[G1]] : tensor<8x4xf32> -> tensor<32xf32>
// CHECK: %[[CAT:.*]] = smp.concat %[[F2]], %[[F1]] {axis = 0 : i64}
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[CAT]] on @dp
// CHECK: smp.slice %[[SUM]] {limits = array<i64: 32>, smp.view, starts = array<i64: 0>
// CHECK: smp.slice %[[SUM]] {limits = array<i64: 64>, smp.view, starts = array<i64: 32>
// CHECK-NOT: shard.all_reduce {{.*}} : tensor<{{[0-9]+}}x

// Tiny buckets: one all-reduce per gradient; w2's runs before the backward
// of the first layer (the matmul giving w1's gradient).
// SMALL-LABEL: func.func @train_step
// SMALL: %[[G2:.*]] = smp.transpose %{{[0-9]+}} {{.*}} : tensor<8x4xf32> -> tensor<4x8xf32>
// SMALL-NEXT: shard.all_reduce %[[G2]] on @dp
// SMALL: smp.matmul %arg0, {{.*}} -> tensor<4x8xf32>
// SMALL: %[[G1:.*]] = smp.transpose %{{[0-9]+}} {{.*}} : tensor<4x8xf32> -> tensor<8x4xf32>
// SMALL-NEXT: shard.all_reduce %[[G1]] on @dp

// NONE: shard.all_reduce {{.*}} : tensor<{{4x8|8x4}}xf32>
// NONE: shard.all_reduce {{.*}} : tensor<{{4x8|8x4}}xf32>
// NONE-NOT: smp.concat

module {
  func.func @main(%x: tensor<2x4xf32> {smp.input = "x"},
                  %w1: tensor<8x4xf32> {smp.param = "w1"},
                  %w2: tensor<4x8xf32> {smp.param = "w2"})
      -> (tensor<2x4xf32> {smp.output = "y"}) {
    %w1t = smp.transpose %w1 {perm = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
    %w2t = smp.transpose %w2 {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
    %h = smp.matmul %x, %w1t : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
    %r = smp.relu %h : tensor<2x8xf32>
    %y = smp.matmul %r, %w2t : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    return %y : tensor<2x4xf32>
  }
}
