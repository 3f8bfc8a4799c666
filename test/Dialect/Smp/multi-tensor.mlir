// RUN: smp-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(smp-multi-tensor))' | FileCheck %s

// The updates with one lr, step and set of hyper-parameters become one
// adam_update_multi where the last of them was (after the norm that the
// gradients of the later ones come from); an f16 gradient of an f32
// parameter stays as it was.
// CHECK-LABEL: func.func @updates
// CHECK: smp.sqrt
// CHECK-NOT: smp.adam_update
// CHECK: %[[P:.*]]:3, %[[M:.*]]:3, %[[V:.*]]:3 = smp.adam_update_multi params(%arg0, %arg1, %arg2) grads(%arg3, %arg4, %{{.*}}) exp_avgs(%arg6, %arg7, %arg8) exp_avg_sqs(%arg9, %arg10, %arg11) lr %arg12 step %arg13 {weight_decay = 0.00999999977 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) (tensor<4x8xf32>, tensor<8xf16>, tensor<8xf32>)
// CHECK-NOT: smp.adam_update
// CHECK: return %[[P]]#0, %[[M]]#0, %[[V]]#0, %[[P]]#1, %[[M]]#1, %[[V]]#1, %[[P]]#2, %[[M]]#2, %[[V]]#2
func.func @updates(%p0: tensor<4x8xf32>, %p1: tensor<8xf32>, %p2: tensor<8xf32>,
                   %g0: tensor<4x8xf32>, %g1: tensor<8xf16>, %g2: tensor<8xf32>,
                   %m0: tensor<4x8xf32>, %m1: tensor<8xf32>, %m2: tensor<8xf32>,
                   %v0: tensor<4x8xf32>, %v1: tensor<8xf32>, %v2: tensor<8xf32>,
                   %lr: tensor<f32>, %step: tensor<f32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a0, %b0, %c0 = smp.adam_update %p0, %g0, %m0, %v0, %lr, %step {weight_decay = 0.00999999977 : f32} : tensor<4x8xf32>, tensor<f32>
  %a1, %b1, %c1 = smp.adam_update %p1, %g1, %m1, %v1, %lr, %step {weight_decay = 0.00999999977 : f32} : tensor<8xf32>, tensor<f32> grad tensor<8xf16>
  %n = smp.sqrt %g2 : tensor<8xf32>
  %a2, %b2, %c2 = smp.adam_update %p2, %n, %m2, %v2, %lr, %step {weight_decay = 0.00999999977 : f32} : tensor<8xf32>, tensor<f32>
  return %a0, %b0, %c0, %a1, %b1, %c1, %a2, %b2, %c2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Groups: a different weight decay, lr or skip flag is another group; an
// op that reads an update's result (a ZeRO gather of the new parameter)
// ends its group before it; a group of one stays an adam_update.
// CHECK-LABEL: func.func @groups
// CHECK: %[[A:.*]]:2, %{{.*}}:2, %{{.*}}:2 = smp.adam_update_multi params(%arg0, %arg1) {{.*}} lr %arg6 step %arg8 {weight_decay = 1.000000e-01 : f32}
// CHECK-NEXT: %[[R:.*]] = smp.neg %[[A]]#1
// CHECK-NEXT: smp.adam_update %arg2, {{.*}}, %arg6, %arg8 {weight_decay = 1.000000e-01 : f32}
// CHECK-DAG: smp.adam_update_multi params(%arg3, %arg4) {{.*}} lr %arg6 step %arg8 :
// CHECK-DAG: smp.adam_update %arg5, {{.*}}, %arg7, %arg8 :
// CHECK-DAG: smp.adam_update_multi params(%arg0, %arg1) {{.*}} lr %arg6 step %arg8 skip %arg9(tensor<i1>)
func.func @groups(%p0: tensor<8xf32>, %p1: tensor<8xf32>, %p2: tensor<8xf32>,
                  %p3: tensor<8xf32>, %p4: tensor<8xf32>, %p5: tensor<8xf32>,
                  %lr: tensor<f32>, %lr2: tensor<f32>, %step: tensor<f32>, %skip: tensor<i1>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a0, %b0, %c0 = smp.adam_update %p0, %p0, %p0, %p0, %lr, %step {weight_decay = 0.1 : f32} : tensor<8xf32>, tensor<f32>
  %d3, %e3, %f3 = smp.adam_update %p3, %p3, %p3, %p3, %lr, %step : tensor<8xf32>, tensor<f32>
  %a1, %b1, %c1 = smp.adam_update %p1, %p1, %p1, %p1, %lr, %step {weight_decay = 0.1 : f32} : tensor<8xf32>, tensor<f32>
  %r = smp.neg %a1 : tensor<8xf32>
  %a2, %b2, %c2 = smp.adam_update %p2, %r, %p2, %p2, %lr, %step {weight_decay = 0.1 : f32} : tensor<8xf32>, tensor<f32>
  %d4, %e4, %f4 = smp.adam_update %p4, %p4, %p4, %p4, %lr, %step : tensor<8xf32>, tensor<f32>
  %d5, %e5, %f5 = smp.adam_update %p5, %p5, %p5, %p5, %lr2, %step : tensor<8xf32>, tensor<f32>
  %s0, %s1, %s2 = smp.adam_update %p0, %p0, %p0, %p0, %lr, %step skip %skip(tensor<i1>) : tensor<8xf32>, tensor<f32>
  %t0, %t1, %t2 = smp.adam_update %p1, %p1, %p1, %p1, %lr, %step skip %skip(tensor<i1>) : tensor<8xf32>, tensor<f32>
  return %a0, %a2, %d3, %d4, %d5, %s0, %t0, %b1, %c1 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// Mixed precision's casts of the parameters become one cast_multi where
// the first was, one for each set of annotations (a pipeline stage's); a
// cast of a computed value and one between integer types stay.
// CHECK-LABEL: func.func @casts
// CHECK-NEXT: %[[C:.*]]:3 = smp.cast_multi %arg0, %arg1, %arg2 : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xf32>)
// CHECK-NEXT: smp.neg %[[C]]#0
// CHECK-NEXT: smp.cast %arg3 : tensor<8xi64> to tensor<8xi32>
// CHECK-NEXT: smp.cast %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]]:2 = smp.cast_multi %arg1, %arg0 {smp.stage = 1 : i64}
// CHECK-NOT: smp.cast
func.func @casts(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<8xbf16>, %i: tensor<8xi64>)
    -> (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xi32>, tensor<4x8xf32>, tensor<8xbf16>, tensor<4x8xf16>) {
  %ca = smp.cast %a : tensor<4x8xf32> to tensor<4x8xbf16>
  %n = smp.neg %ca : tensor<4x8xbf16>
  %ci = smp.cast %i : tensor<8xi64> to tensor<8xi32>
  %cn = smp.cast %n : tensor<4x8xbf16> to tensor<4x8xf32>
  %cb = smp.cast %b : tensor<8xf32> to tensor<8xbf16>
  %cs = smp.cast %b {smp.stage = 1 : i64} : tensor<8xf32> to tensor<8xbf16>
  %cc = smp.cast %c : tensor<8xbf16> to tensor<8xf32>
  %ct = smp.cast %a {smp.stage = 1 : i64} : tensor<4x8xf32> to tensor<4x8xf16>
  return %n, %cb, %cc, %ci, %cn, %cs, %ct : tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xf32>, tensor<8xi32>, tensor<4x8xf32>, tensor<8xbf16>, tensor<4x8xf16>
}

// -----

// One cast of an argument and one update: nothing to group.
// CHECK-LABEL: func.func @single
// CHECK: smp.cast %arg0
// CHECK: smp.adam_update %arg1
// CHECK-NOT: multi
func.func @single(%a: tensor<8xf32>, %p: tensor<8xf32>, %lr: tensor<f32>) -> (tensor<8xbf16>, tensor<8xf32>) {
  %c = smp.cast %a : tensor<8xf32> to tensor<8xbf16>
  %x, %y, %z = smp.adam_update %p, %p, %p, %p, %lr, %lr : tensor<8xf32>, tensor<f32>
  return %c, %x : tensor<8xbf16>, tensor<8xf32>
}

// -----

// SGD: the updates with one lr, step and momentum become one
// sgd_update_multi (nesterov another group; a group of one stays).
// CHECK-LABEL: func.func @sgd
// CHECK: %[[P:.*]]:2, %[[B:.*]]:2 = smp.sgd_update_multi params(%arg0, %arg1) grads(%arg3, %arg4) momentum_buffers(%arg6, %arg7) lr %arg9 step %arg10 {momentum = 0.899999976 : f32} : (tensor<4x8xf32>, tensor<8xf32>) (tensor<4x8xf32>, tensor<8xbf16>) (tensor<4x8xf32>, tensor<8xf32>) tensor<f32> -> (tensor<4x8xf32>, tensor<8xf32>) (tensor<4x8xf32>, tensor<8xf32>)
// CHECK: %[[Q:.*]], %[[C:.*]] = smp.sgd_update %arg2, %arg5, %arg8, %arg9, %arg10 {momentum = 0.899999976 : f32, nesterov = true}
// CHECK: return %[[P]]#0, %[[B]]#0, %[[P]]#1, %[[B]]#1, %[[Q]], %[[C]]
func.func @sgd(%p0: tensor<4x8xf32>, %p1: tensor<8xf32>, %p2: tensor<8xf32>,
               %g0: tensor<4x8xf32>, %g1: tensor<8xbf16>, %g2: tensor<8xf32>,
               %b0: tensor<4x8xf32>, %b1: tensor<8xf32>, %b2: tensor<8xf32>,
               %lr: tensor<f32>, %step: tensor<f32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %a0, %c0 = smp.sgd_update %p0, %g0, %b0, %lr, %step {momentum = 0.899999976 : f32} : tensor<4x8xf32>, tensor<f32>
  %a1, %c1 = smp.sgd_update %p1, %g1, %b1, %lr, %step {momentum = 0.899999976 : f32} : tensor<8xf32>, tensor<f32> grad tensor<8xbf16>
  %a2, %c2 = smp.sgd_update %p2, %g2, %b2, %lr, %step {momentum = 0.899999976 : f32, nesterov = true} : tensor<8xf32>, tensor<f32>
  return %a0, %c0, %a1, %c1, %a2, %c2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// ZeRO-1's slices of the parameters for their update: those along dim 0 of
// @dp's axis 0 into 2 parts, of f32 and with the same annotations become one
// all_slice_multi where the last of them was; an op that reads one (the
// add) ends the group before it. An f16 one, one over @tp and one along dim
// 1 are of no group (a group of one stays an all_slice).
module {
  shard.grid @dp(shape = 2)
  shard.grid @tp(shape = 2)
  // CHECK-LABEL: func.func @slices
  // CHECK: %[[M:.*]]:2 = smp.all_slice_multi %arg0, %arg1 on @dp grid_axes = [0] : (tensor<8xf32>, tensor<4x2xf32>) -> (tensor<4xf32>, tensor<2x2xf32>)
  // CHECK: shard.all_slice %arg2 on @dp grid_axes = [0] slice_axis = 0 : tensor<8xf16> -> tensor<4xf16>
  // CHECK: shard.all_slice %arg3 on @tp
  // CHECK: shard.all_slice %arg4 on @dp grid_axes = [0] slice_axis = 1
  // CHECK: smp.add %[[M]]#0, %arg6
  // CHECK: %[[N:.*]]:2 = smp.all_slice_multi %arg5, %arg0 on @dp grid_axes = [0] {smp.stage = 0 : i64} : (tensor<6xf32>, tensor<8xf32>) -> (tensor<3xf32>, tensor<4xf32>)
  // CHECK-NOT: shard.all_slice
  // CHECK: return {{.*}}%[[M]]#1, {{.*}}%[[N]]#0, %[[N]]#1
  func.func @slices(%a: tensor<8xf32>, %b: tensor<4x2xf32>, %c: tensor<8xf16>,
                    %d: tensor<8xf32>, %e: tensor<2x4xf32>, %f: tensor<6xf32>,
                    %g: tensor<4xf32>)
      -> (tensor<4xf32>, tensor<2x2xf32>, tensor<4xf16>, tensor<4xf32>, tensor<2x2xf32>, tensor<3xf32>, tensor<4xf32>) {
    %0 = shard.all_slice %a on @dp grid_axes = [0] slice_axis = 0 : tensor<8xf32> -> tensor<4xf32>
    %1 = shard.all_slice %b on @dp grid_axes = [0] slice_axis = 0 : tensor<4x2xf32> -> tensor<2x2xf32>
    %2 = shard.all_slice %c on @dp grid_axes = [0] slice_axis = 0 : tensor<8xf16> -> tensor<4xf16>
    %3 = shard.all_slice %d on @tp grid_axes = [0] slice_axis = 0 : tensor<8xf32> -> tensor<4xf32>
    %4 = shard.all_slice %e on @dp grid_axes = [0] slice_axis = 1 : tensor<2x4xf32> -> tensor<2x2xf32>
    %5 = smp.add %0, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %6 = shard.all_slice %f on @dp grid_axes = [0] slice_axis = 0 {smp.stage = 0 : i64} : tensor<6xf32> -> tensor<3xf32>
    %7 = shard.all_slice %a on @dp grid_axes = [0] slice_axis = 0 {smp.stage = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
    return %5, %1, %2, %3, %4, %6, %7 : tensor<4xf32>, tensor<2x2xf32>, tensor<4xf16>, tensor<4xf32>, tensor<2x2xf32>, tensor<3xf32>, tensor<4xf32>
  }
}

// -----

// A gradient bucket: the 16-bit gradients cast to f32 and (through a
// reshape) concatenated. The casts that only the concat reads become one
// cast_multi right before it, the reshape after it; a cast something else
// reads too (the mul) and an integer one stay.
// CHECK-LABEL: func.func @bucket
// CHECK: %[[A:.*]] = smp.add %arg0, %arg0
// CHECK: %[[K:.*]] = smp.cast %arg2 : tensor<4xbf16> to tensor<4xf32>
// CHECK: smp.mul %[[K]], %[[K]]
// CHECK: %[[B:.*]] = smp.add %arg1, %arg1
// CHECK: %[[I:.*]] = smp.cast %arg3 : tensor<2xi32> to tensor<2xf32>
// CHECK: %[[M:.*]]:2 = smp.cast_multi %[[A]], %[[B]] : (tensor<2x2xbf16>, tensor<3xbf16>) -> (tensor<2x2xf32>, tensor<3xf32>)
// CHECK-NEXT: %[[R:.*]] = smp.reshape %[[M]]#0 : tensor<2x2xf32> -> tensor<4xf32>
// CHECK-NEXT: smp.concat %[[R]], %[[M]]#1, %[[K]], %[[I]] {axis = 0 : i64}
func.func @bucket(%a: tensor<2x2xbf16>, %b: tensor<3xbf16>, %k: tensor<4xbf16>,
                  %i: tensor<2xi32>) -> (tensor<13xf32>, tensor<4xf32>) {
  %a2 = smp.add %a, %a : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xbf16>
  %ca = smp.cast %a2 : tensor<2x2xbf16> to tensor<2x2xf32>
  %ra = smp.reshape %ca : tensor<2x2xf32> -> tensor<4xf32>
  %ck = smp.cast %k : tensor<4xbf16> to tensor<4xf32>
  %sq = smp.mul %ck, %ck : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b2 = smp.add %b, %b : (tensor<3xbf16>, tensor<3xbf16>) -> tensor<3xbf16>
  %cb = smp.cast %b2 : tensor<3xbf16> to tensor<3xf32>
  %ci = smp.cast %i : tensor<2xi32> to tensor<2xf32>
  %cat = smp.concat %ra, %cb, %ck, %ci {axis = 0 : i64} : (tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<2xf32>) -> tensor<13xf32>
  return %cat, %sq : tensor<13xf32>, tensor<4xf32>
}

// -----

// Gradient accumulation over micro-batches under mixed precision: the
// 16-bit gradients cast to f32 and added (micro-batches 0 and 1 of two
// parameters, then micro-batch 2 into each sum) become add_multis of the
// 16-bit gradients, the casts gone: the first where its last add was (the
// add of micro-batch 2 reads a sum and ends the group there), the second
// (an f32 sum on either side) before the add that reads one of its sums.
// An add without a cast (%u) stays.
// CHECK-LABEL: func.func @accumulate
// CHECK-NOT: smp.cast
// CHECK: %[[M:.*]]:2 = smp.add_multi %arg0, %arg1, %arg2, %arg3 : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>, tensor<8xbf16>) -> (tensor<4x8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[U:.*]] = smp.add %arg6, %arg6
// CHECK-NEXT: %[[N:.*]]:2 = smp.add_multi %[[M]]#0, %arg5, %arg4, %[[M]]#1 : (tensor<4x8xf32>, tensor<8xf16>, tensor<4x8xbf16>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>)
// CHECK-NEXT: %[[W:.*]] = smp.add %[[N]]#1, %[[U]]
// CHECK-NEXT: return %[[N]]#0, %[[W]]
func.func @accumulate(%g0: tensor<4x8xbf16>, %h0: tensor<8xbf16>,
                      %g1: tensor<4x8xbf16>, %h1: tensor<8xbf16>,
                      %g2: tensor<4x8xbf16>, %h2: tensor<8xf16>,
                      %f: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  %c0 = smp.cast %g0 : tensor<4x8xbf16> to tensor<4x8xf32>
  %d0 = smp.cast %h0 : tensor<8xbf16> to tensor<8xf32>
  %c1 = smp.cast %g1 : tensor<4x8xbf16> to tensor<4x8xf32>
  %s = smp.add %c0, %c1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %d1 = smp.cast %h1 : tensor<8xbf16> to tensor<8xf32>
  %t = smp.add %d0, %d1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %c2 = smp.cast %g2 : tensor<4x8xbf16> to tensor<4x8xf32>
  %s2 = smp.add %s, %c2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %u = smp.add %f, %f : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %d2 = smp.cast %h2 : tensor<8xf16> to tensor<8xf32>
  %t2 = smp.add %d2, %t : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %w = smp.add %t2, %u : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %s2, %w : tensor<4x8xf32>, tensor<8xf32>
}

// -----

// Not accumulations: a cast two ops read, a broadcast, a sum that is not
// f32 (f64), an integer cast; each stays. And a group ends at 64 MiB of
// sums: two of 32 MiB are one add_multi where the second was, the third
// (another 32 MiB) and the fourth form the next.
// (The 16-bit sources are computed, as gradients are: casts of arguments
// would become a cast_multi.)
// CHECK-LABEL: func.func @not_accumulations
// CHECK: %[[A:.*]] = smp.cast %{{.*}} : tensor<8xbf16> to tensor<8xf32>
// CHECK: smp.add %[[A]], %arg1
// CHECK: smp.mul %[[A]], %[[A]]
// CHECK: %[[B:.*]] = smp.cast %{{.*}} : tensor<1xbf16> to tensor<1xf32>
// CHECK: smp.add %arg1, %[[B]]
// CHECK: %[[C:.*]] = smp.cast %{{.*}} : tensor<8xbf16> to tensor<8xf64>
// CHECK: smp.add %[[C]], %arg4
// CHECK: %[[D:.*]] = smp.cast %arg5 : tensor<8xi32> to tensor<8xf32>
// CHECK: smp.add %[[D]], %arg1
// CHECK-NOT: smp.cast
// CHECK: %[[M:.*]]:2 = smp.add_multi %arg6, %arg6, %arg7, %arg7 : (tensor<2048x4096xbf16>, tensor<2048x4096xbf16>, tensor<2048x4096xf32>, tensor<2048x4096xf32>)
// CHECK: %[[N:.*]]:2 = smp.add_multi %arg6, %arg0, %arg7, %arg1 : (tensor<2048x4096xbf16>, tensor<8xbf16>, tensor<2048x4096xf32>, tensor<8xf32>)
func.func @not_accumulations(%a: tensor<8xbf16>, %f: tensor<8xf32>,
                             %b: tensor<1xbf16>, %c: tensor<8xbf16>,
                             %e: tensor<8xf64>, %i: tensor<8xi32>,
                             %big: tensor<2048x4096xbf16>,
                             %bigf: tensor<2048x4096xf32>)
    -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf64>, tensor<8xf32>,
        tensor<2048x4096xf32>, tensor<2048x4096xf32>, tensor<2048x4096xf32>, tensor<8xf32>) {
  %a1 = smp.abs %a : tensor<8xbf16>
  %ca = smp.cast %a1 : tensor<8xbf16> to tensor<8xf32>
  %x0 = smp.add %ca, %f : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %x1 = smp.mul %ca, %ca : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %b1 = smp.abs %b : tensor<1xbf16>
  %cb = smp.cast %b1 : tensor<1xbf16> to tensor<1xf32>
  %x2 = smp.add %f, %cb : (tensor<8xf32>, tensor<1xf32>) -> tensor<8xf32>
  %c1 = smp.abs %c : tensor<8xbf16>
  %cc = smp.cast %c1 : tensor<8xbf16> to tensor<8xf64>
  %x3 = smp.add %cc, %e : (tensor<8xf64>, tensor<8xf64>) -> tensor<8xf64>
  %ci = smp.cast %i : tensor<8xi32> to tensor<8xf32>
  %x4 = smp.add %ci, %f : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %g0 = smp.cast %big : tensor<2048x4096xbf16> to tensor<2048x4096xf32>
  %y0 = smp.add %g0, %bigf : (tensor<2048x4096xf32>, tensor<2048x4096xf32>) -> tensor<2048x4096xf32>
  %g1 = smp.cast %big : tensor<2048x4096xbf16> to tensor<2048x4096xf32>
  %y1 = smp.add %g1, %bigf : (tensor<2048x4096xf32>, tensor<2048x4096xf32>) -> tensor<2048x4096xf32>
  %g2 = smp.cast %big : tensor<2048x4096xbf16> to tensor<2048x4096xf32>
  %y2 = smp.add %g2, %bigf : (tensor<2048x4096xf32>, tensor<2048x4096xf32>) -> tensor<2048x4096xf32>
  %g3 = smp.cast %a : tensor<8xbf16> to tensor<8xf32>
  %y3 = smp.add %g3, %f : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %x0, %x1, %x2, %x3, %x4, %y0, %y1, %y2, %y3 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf64>, tensor<8xf32>, tensor<2048x4096xf32>, tensor<2048x4096xf32>, tensor<2048x4096xf32>, tensor<8xf32>
}
