// One MLP applied at two depths (ALBERT's one layer at every depth: its
// weights read by both layers' matmuls): the two regions are one, split
// alike. Each rank keeps 8 of the 16 hidden units of w1 and w2, each use
// enters through its own smp.tp_copy and leaves through its own all-reduce.
// RUN: smp-opt %s --smp-tensor-parallel=tp=2 | FileCheck %s
// RUN: smp-opt %s --smp-tensor-parallel=tp=2 '--smp-build-train-step=loss=mse:y:target' | FileCheck %s --check-prefix=GRAD

// CHECK: func.func @main(%[[X:[^:]*]]: tensor<2x8xf32> {smp.input = "x"},
// CHECK-SAME: tensor<8x8xf32> {smp.layout = #smp.layout<tp = split(dim = 1)>, smp.param = "w1"}
// CHECK-SAME: tensor<8x8xf32> {smp.layout = #smp.layout<tp = split(dim = 0)>, smp.param = "w2"}
// CHECK: %[[C1:.*]] = smp.tp_copy %[[X]]
// CHECK: smp.matmul %[[C1]], %{{.*}} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[P1:.*]] = smp.matmul %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[S1:.*]] = shard.all_reduce %[[P1]] on @tp
// CHECK: %[[C2:.*]] = smp.tp_copy %[[S1]]
// CHECK: smp.matmul %[[C2]], %{{.*}} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[P2:.*]] = smp.matmul %{{.*}}, %{{.*}} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
// CHECK: %[[S2:.*]] = shard.all_reduce %[[P2]] on @tp
// CHECK: return %[[S2]]

// GRAD-LABEL: func.func @train_step
// GRAD-COUNT-2: smp.tp_copy

module {
  func.func @main(%x: tensor<2x8xf32> {smp.input = "x"},
                  %w1: tensor<8x16xf32> {smp.param = "w1"},
                  %w2: tensor<16x8xf32> {smp.param = "w2"})
      -> (tensor<2x8xf32> {smp.output = "y"}) {
    %h1 = smp.matmul %x, %w1 : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
    %a1 = smp.gelu %h1 : tensor<2x16xf32>
    %y1 = smp.matmul %a1, %w2 : (tensor<2x16xf32>, tensor<16x8xf32>) -> tensor<2x8xf32>
    %h2 = smp.matmul %y1, %w1 : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
    %a2 = smp.gelu %h2 : tensor<2x16xf32>
    %y2 = smp.matmul %a2, %w2 : (tensor<2x16xf32>, tensor<16x8xf32>) -> tensor<2x8xf32>
    return %y2 : tensor<2x8xf32>
  }
}
