// smp.tile's sharding rule (lib/Dialect/Smp/OpModels/DataMovement.cpp): a
// tile that repeats the split dim once passes the split through (each rank
// tiles its share); one that repeats the split dim ends the region, so a
// model with only that path between its matmuls has no layer to split.
// RUN: not smp-opt %s --split-input-file --smp-tensor-parallel=tp=2 2>/dev/null | FileCheck %s
// RUN: not smp-opt %s --split-input-file --smp-tensor-parallel=tp=2 2>&1 >/dev/null | FileCheck %s --check-prefix=REPEATED

// CHECK: %arg1: tensor<8x8xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "w1"}
// CHECK-SAME: %arg2: tensor<8x8xf32> {smp.layout = #smp.layout<tp = split(dim = 0)>, smp.param = "w2"}
// CHECK: %[[H:.*]] = smp.matmul %{{.*}}, %arg1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: smp.tile %[[H]] {repeats = array<i64: 2, 1, 1>} : tensor<2x4x8xf32> -> tensor<4x4x8xf32>
// CHECK: smp.gelu %{{.*}} : tensor<4x4x8xf32>
// CHECK: smp.matmul %{{.*}}, %arg2 : (tensor<4x4x8xf32>, tensor<8x8xf32>) -> tensor<4x4x8xf32>
// CHECK: shard.all_reduce %{{.*}} on @tp
module {
  func.func @main(%x: tensor<2x4x8xf32> {smp.input = "x"},
                  %w1: tensor<8x16xf32> {smp.param = "w1"},
                  %w2: tensor<16x8xf32> {smp.param = "w2"}) -> (tensor<4x4x8xf32> {smp.output = "y"}) {
    %h = smp.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32> loc("fc1")
    %t = smp.tile %h {repeats = array<i64: 2, 1, 1>} : tensor<2x4x16xf32> -> tensor<4x4x16xf32>
    %g = smp.gelu %t : tensor<4x4x16xf32>
    %y = smp.matmul %g, %w2 : (tensor<4x4x16xf32>, tensor<16x8xf32>) -> tensor<4x4x8xf32> loc("fc2")
    return %y : tensor<4x4x8xf32>
  }
}

// -----

// REPEATED: error: smp-tensor-parallel: found no layer to split over tp 2
module {
  func.func @main(%x: tensor<2x4x8xf32> {smp.input = "x"},
                  %w1: tensor<8x8xf32> {smp.param = "w1"},
                  %w2: tensor<16x8xf32> {smp.param = "w2"}) -> (tensor<2x4x8xf32> {smp.output = "y"}) {
    %h = smp.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32> loc("fc1")
    %t = smp.tile %h {repeats = array<i64: 1, 1, 2>} : tensor<2x4x8xf32> -> tensor<2x4x16xf32>
    %g = smp.gelu %t : tensor<2x4x16xf32>
    %y = smp.matmul %g, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32> loc("fc2")
    return %y : tensor<2x4x8xf32>
  }
}
