// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-master-weights{freeze=^frozen}))' | FileCheck %s

// A bf16 and an f16 parameter become f32 arguments cast to their stored
// type once at the top; the function computes as before. f32 parameters,
// buffers (smp.frozen), --freeze'd parameters and inputs keep their types.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xbf16> {smp.input = "x"}, %[[W:.*]]: tensor<3x4xf32> {smp.param = "w"}, %[[H:.*]]: tensor<4xf32> {smp.param = "h"}, %[[F:.*]]: tensor<4xf32> {smp.param = "f"}, %[[B:.*]]: tensor<4xbf16> {smp.frozen, smp.param = "buf"}, %[[Z:.*]]: tensor<4xbf16> {smp.param = "frozen.w"})
// CHECK-SAME: -> (tensor<2x4xbf16> {smp.output = "y"})
// CHECK-DAG: %[[WL:.*]] = smp.cast %[[W]] : tensor<3x4xf32> to tensor<3x4xbf16>
// CHECK-DAG: %[[HL:.*]] = smp.cast %[[H]] : tensor<4xf32> to tensor<4xf16>
// CHECK: %[[M:.*]] = smp.matmul %[[X]], %[[WL]] : (tensor<2x3xbf16>, tensor<3x4xbf16>) -> tensor<2x4xbf16>
// CHECK: %[[C:.*]] = smp.cast %[[HL]] : tensor<4xf16> to tensor<4xbf16>
// CHECK: %[[A:.*]] = smp.add %[[M]], %[[C]]
// CHECK: %[[A2:.*]] = smp.add %[[A]], %[[B]]
// CHECK: %[[A3:.*]] = smp.add %[[A2]], %[[Z]]
// CHECK: %[[FL:.*]] = smp.cast %[[F]] : tensor<4xf32> to tensor<4xbf16>
// CHECK: smp.add %[[A3]], %[[FL]]
func.func @main(%x: tensor<2x3xbf16> {smp.input = "x"},
                %w: tensor<3x4xbf16> {smp.param = "w"},
                %h: tensor<4xf16> {smp.param = "h"},
                %f: tensor<4xf32> {smp.param = "f"},
                %buf: tensor<4xbf16> {smp.param = "buf", smp.frozen},
                %z: tensor<4xbf16> {smp.param = "frozen.w"})
    -> (tensor<2x4xbf16> {smp.output = "y"}) {
  %0 = smp.matmul %x, %w : (tensor<2x3xbf16>, tensor<3x4xbf16>) -> tensor<2x4xbf16>
  %1 = smp.cast %h : tensor<4xf16> to tensor<4xbf16>
  %2 = smp.add %0, %1 : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  %3 = smp.add %2, %buf : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  %4 = smp.add %3, %z : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  %5 = smp.cast %f : tensor<4xf32> to tensor<4xbf16>
  %6 = smp.add %4, %5 : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>
  return %6 : tensor<2x4xbf16>
}

// -----

// An unused 16-bit parameter is retyped (its master copy is what the
// optimizer keeps) without a cast.
// CHECK-LABEL: func.func @unused
// CHECK-SAME: (%{{.*}}: tensor<4xf32> {smp.param = "u"}
// CHECK-NOT: smp.cast
func.func @unused(%u: tensor<4xbf16> {smp.param = "u"}, %x: tensor<4xf32> {smp.input = "x"})
    -> (tensor<4xf32> {smp.output = "y"}) {
  return %x : tensor<4xf32>
}

// -----

// A batch norm's running statistics (not smp.frozen: the TorchScript
// training-mode export makes them graph parameters) keep their stored type:
// updated, never trained, they get no master copy. Its scale and bias do.
// CHECK-LABEL: func.func @batch_norm
// CHECK-SAME: %[[S:[^:]*]]: tensor<3xf32> {smp.param = "bn.weight"}, %[[B:[^:]*]]: tensor<3xf32> {smp.param = "bn.bias"}, %[[M:[^:]*]]: tensor<3xbf16> {smp.param = "bn.running_mean"}, %[[V:[^:]*]]: tensor<3xbf16> {smp.param = "bn.running_var"}
// CHECK-DAG: %[[SL:.*]] = smp.cast %[[S]] : tensor<3xf32> to tensor<3xbf16>
// CHECK-DAG: %[[BL:.*]] = smp.cast %[[B]] : tensor<3xf32> to tensor<3xbf16>
// CHECK: smp.batch_norm %{{.*}}, %[[SL]], %[[BL]], %[[M]], %[[V]]
func.func @batch_norm(%x: tensor<2x3xbf16> {smp.input = "x"},
                      %s: tensor<3xbf16> {smp.param = "bn.weight"},
                      %b: tensor<3xbf16> {smp.param = "bn.bias"},
                      %m: tensor<3xbf16> {smp.param = "bn.running_mean"},
                      %v: tensor<3xbf16> {smp.param = "bn.running_var"})
    -> (tensor<2x3xbf16> {smp.output = "y"}) {
  %0 = smp.batch_norm %x, %s, %b, %m, %v {epsilon = 1.0e-5 : f32} : (tensor<2x3xbf16>, tensor<3xbf16>, tensor<3xbf16>, tensor<3xbf16>, tensor<3xbf16>) -> tensor<2x3xbf16>
  return %0 : tensor<2x3xbf16>
}
