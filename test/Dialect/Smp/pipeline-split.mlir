// RUN: smp-opt %s --smp-pipeline-split=stages=2 | FileCheck %s --check-prefix=AUTO2
// RUN: smp-opt %s --smp-pipeline-split=stages=3 | FileCheck %s --check-prefix=AUTO3
// RUN: smp-opt %s '--smp-pipeline-split=stages=3 cuts=l2.mm,l3.mm' | FileCheck %s --check-prefix=CUTS
// RUN: smp-opt %s --smp-pipeline-split=stages=1 | FileCheck %s --check-prefix=ONE
// RUN: smp-opt %s --smp-pipeline-split=stages=6 | FileCheck %s --check-prefix=MAX

// An embedding (matmul by a transposed, scaled weight `e`), three residual
// layers and an LM head tied to the embedding. Ops in program order that are
// on the parameters' path (the costs are FLOPs + bytes: a 4x8x8 matmul costs
// 1024, an add of 4x8 tensors 416):
//   embed 1024 | embed_mask 416 | l1.mm 1024, l1.res 416 | l2 1440 | l3 1440
//   | head 1024
// A single tensor crosses before embed_mask, l1.mm, l2.mm, l3.mm and head:
// five cut points, so at most six stages.
// The mask cast (inputs only) and the constant get no stage. The weight-only
// chain e_t -> e_scaled runs on the stage of its users: a copy per stage,
// the first stage keeping the original and each later stage a clone (put
// before the original).

// Balanced over 2 stages: cut before l2.mm (2880 vs 3904; the cut before
// l3.mm would give 4320 vs 2464).
// AUTO2: module attributes {smp.stage_costs = array<f64: 2.880000e+03, 3.904000e+03>}
// AUTO2: func.func @main(%[[X:[^:]*]]: tensor<4x8xf32> {smp.input = "x"}, %[[MASK:[^:]*]]: tensor<4x8xi64> {smp.input = "mask"}, %[[E:[^:]*]]: tensor<8x8xf32> {smp.param = "e"}, %[[W1:[^:]*]]: tensor<8x8xf32> {smp.param = "w1"}, %[[W2:[^:]*]]: tensor<8x8xf32> {smp.param = "w2"}, %[[W3:[^:]*]]: tensor<8x8xf32> {smp.param = "w3"})
// AUTO2-NEXT: %[[HALF:.*]] = smp.constant dense<5.000000e-01> : tensor<f32>
// AUTO2-NEXT: %[[M:.*]] = smp.cast %[[MASK]] : tensor<4x8xi64> to tensor<4x8xf32>
// AUTO2-NEXT: %[[ET1:.*]] = smp.transpose %[[E]] {perm = array<i64: 1, 0>, smp.stage = 1 : i64}
// AUTO2-NEXT: %[[ET0:.*]] = smp.transpose %[[E]] {perm = array<i64: 1, 0>, smp.stage = 0 : i64}
// AUTO2-NEXT: %[[ES1:.*]] = smp.mul %[[ET1]], %[[HALF]] {smp.stage = 1 : i64}
// AUTO2-NEXT: %[[ES0:.*]] = smp.mul %[[ET0]], %[[HALF]] {smp.stage = 0 : i64}
// AUTO2-NEXT: %[[H0:.*]] = smp.matmul %[[X]], %[[ES0]] {smp.stage = 0 : i64}
// AUTO2-NEXT: %[[A0:.*]] = smp.add %[[H0]], %[[M]] {smp.stage = 0 : i64}
// AUTO2-NEXT: smp.matmul %[[A0]], %[[W1]] {smp.stage = 0 : i64}
// AUTO2-NEXT: %[[R1:.*]] = smp.add {{.*}} {smp.stage = 0 : i64}
// AUTO2-NEXT: smp.matmul %[[R1]], %[[W2]] {smp.stage = 1 : i64}
// AUTO2-NEXT: smp.add {{.*}} {smp.stage = 1 : i64}
// AUTO2-NEXT: smp.matmul {{.*}}, %[[W3]] {smp.stage = 1 : i64}
// AUTO2-NEXT: %[[R3:.*]] = smp.add {{.*}} {smp.stage = 1 : i64}
// AUTO2-NEXT: %[[OUT:.*]] = smp.matmul %[[R3]], %[[ES1]] {smp.stage = 1 : i64, transpose_rhs = true}
// AUTO2-NEXT: return %[[OUT]]
// AUTO2-NOT: smp.stage = 2

// Balanced over 3 stages: cuts before l1.mm and l3.mm (1440, 2880, 2464).
// AUTO3: module attributes {smp.stage_costs = array<f64: 1.440000e+03, 2.880000e+03, 2.464000e+03>}
// AUTO3: smp.transpose {{.*}}smp.stage = 2 : i64
// AUTO3-NEXT: smp.transpose {{.*}}smp.stage = 0 : i64
// AUTO3-NEXT: smp.mul {{.*}} {smp.stage = 2 : i64}
// AUTO3-NEXT: smp.mul {{.*}} {smp.stage = 0 : i64}
// AUTO3-NEXT: smp.matmul {{.*}} {smp.stage = 0 : i64}
// AUTO3-NEXT: smp.add {{.*}} {smp.stage = 0 : i64}
// AUTO3-NEXT: smp.matmul {{.*}} {smp.stage = 1 : i64}
// AUTO3-NEXT: smp.add {{.*}} {smp.stage = 1 : i64}
// AUTO3-NEXT: smp.matmul {{.*}} {smp.stage = 1 : i64}
// AUTO3-NEXT: smp.add {{.*}} {smp.stage = 1 : i64}
// AUTO3-NEXT: smp.matmul {{.*}} {smp.stage = 2 : i64}
// AUTO3-NEXT: smp.add {{.*}} {smp.stage = 2 : i64}
// AUTO3-NEXT: smp.matmul {{.*}} {smp.stage = 2 : i64, transpose_rhs = true}

// Cuts by node name, not where the balance would put them: stage 1 starts
// at l2.mm, stage 2 at l3.mm.
// CUTS: module attributes {smp.stage_costs = array<f64: 2.880000e+03, 1.440000e+03, 2.464000e+03>}
// CUTS: smp.cast %{{[a-z0-9]+}} : tensor<4x8xi64> to tensor<4x8xf32>
// CUTS-NEXT: smp.transpose {{.*}}smp.stage = 2 : i64
// CUTS-NEXT: smp.transpose {{.*}}smp.stage = 0 : i64
// CUTS-NEXT: smp.mul {{.*}} {smp.stage = 2 : i64}
// CUTS-NEXT: smp.mul {{.*}} {smp.stage = 0 : i64}
// CUTS-NEXT: smp.matmul {{.*}} {smp.stage = 0 : i64}
// CUTS-NEXT: smp.add {{.*}} {smp.stage = 0 : i64}
// CUTS-NEXT: smp.matmul {{.*}} {smp.stage = 0 : i64}
// CUTS-NEXT: smp.add {{.*}} {smp.stage = 0 : i64}
// CUTS-NEXT: smp.matmul {{.*}} {smp.stage = 1 : i64}
// CUTS-NEXT: smp.add {{.*}} {smp.stage = 1 : i64}
// CUTS-NEXT: smp.matmul {{.*}} {smp.stage = 2 : i64}
// CUTS-NEXT: smp.add {{.*}} {smp.stage = 2 : i64}
// CUTS-NEXT: smp.matmul {{.*}} {smp.stage = 2 : i64, transpose_rhs = true}

// One stage: everything on stage 0, no copies.
// ONE: module attributes {smp.stage_costs = array<f64: 6.784000e+03>}
// ONE: smp.transpose {{.*}}smp.stage = 0 : i64
// ONE-NOT: smp.transpose
// ONE-NOT: smp.stage = 1

// Six stages: one per cut point.
// MAX: module attributes {smp.stage_costs = array<f64: 1.024000e+03, 4.160000e+02, 1.440000e+03, 1.440000e+03, 1.440000e+03, 1.024000e+03>}
// MAX: smp.transpose {{.*}}smp.stage = 5 : i64
// MAX-NEXT: smp.transpose {{.*}}smp.stage = 0 : i64
// MAX: smp.matmul {{.*}} {smp.stage = 0 : i64}
// MAX-NEXT: smp.add {{.*}} {smp.stage = 1 : i64}
// MAX-NEXT: smp.matmul {{.*}} {smp.stage = 2 : i64}
// MAX-NEXT: smp.add {{.*}} {smp.stage = 2 : i64}
// MAX-NEXT: smp.matmul {{.*}} {smp.stage = 3 : i64}
// MAX-NEXT: smp.add {{.*}} {smp.stage = 3 : i64}
// MAX-NEXT: smp.matmul {{.*}} {smp.stage = 4 : i64}
// MAX-NEXT: smp.add {{.*}} {smp.stage = 4 : i64}
// MAX-NEXT: smp.matmul {{.*}} {smp.stage = 5 : i64, transpose_rhs = true}
func.func @main(%x: tensor<4x8xf32> {smp.input = "x"},
                %mask: tensor<4x8xi64> {smp.input = "mask"},
                %e: tensor<8x8xf32> {smp.param = "e"},
                %w1: tensor<8x8xf32> {smp.param = "w1"},
                %w2: tensor<8x8xf32> {smp.param = "w2"},
                %w3: tensor<8x8xf32> {smp.param = "w3"})
    -> (tensor<4x8xf32> {smp.output = "logits"}) {
  %half = smp.constant dense<0.5> : tensor<f32> loc("half")
  %m = smp.cast %mask : tensor<4x8xi64> to tensor<4x8xf32> loc("mask_cast")
  %et = smp.transpose %e {perm = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32> loc("e_t")
  %es = smp.mul %et, %half : (tensor<8x8xf32>, tensor<f32>) -> tensor<8x8xf32> loc("e_scaled")
  %h0 = smp.matmul %x, %es : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("embed")
  %a0 = smp.add %h0, %m : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("embed_mask")
  %t1 = smp.matmul %a0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("l1.mm")
  %r1 = smp.add %a0, %t1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("l1.res")
  %t2 = smp.matmul %r1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("l2.mm")
  %r2 = smp.add %r1, %t2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("l2.res")
  %t3 = smp.matmul %r2, %w3 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("l3.mm")
  %r3 = smp.add %r2, %t3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> loc("l3.res")
  %out = smp.matmul %r3, %es {transpose_rhs = true} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("head")
  return %out : tensor<4x8xf32>
}
