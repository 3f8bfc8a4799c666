// smp-mark-eval-padding on a model's own loss output (--loss NAME): an
// evaluation pads a short last batch with samples whose labels (an input)
// are -100, which leaves the loss at the real samples' value for a
// cross-entropy ignoring -100 whose labels are that input's values (sliced,
// reshaped, shifted by a concat with -100), sums of what vanishes where the
// labels are -100 (an NLL loss's picks and counts), terms without the
// batch, and their sums, products and constant scalings (OwnLossPadding.h).
// Anything else gets smp.eval_no_pad saying why. A loss that pads and is an
// affine function of one cross-entropy mean without class weights, whose
// labels are the input moved by slices, reshapes, casts and concatenations
// with -100, also gets smp.eval_counted_labels: the ranges of a sample's
// flattened labels that cross-entropy reads (OwnLossCount.h; smprun weighs
// an evaluation batch's global batches by the labels there that are not
// -100); another such loss smp.eval_no_count saying why.
// RUN: smp-opt %s -split-input-file --smp-mark-eval-padding="loss=loss" | FileCheck %s

// A Hugging Face language model's loss: the labels shifted left (a -100
// appended, the first dropped), the logits' positions flattened, a
// cross-entropy mean: it reads labels 1 and 2 of each sample.
// CHECK-LABEL: module attributes {smp.eval_counted_labels = array<i64: 1, 3>, smp.eval_pad_labels = "labels"}
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}, %l: tensor<2x3xi64> {smp.input = "labels"}, %w: tensor<4x5xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %c = smp.constant dense<-100> : tensor<2x1xi64>
    %cat = smp.concat %l, %c {axis = 1 : i64} : (tensor<2x3xi64>, tensor<2x1xi64>) -> tensor<2x4xi64>
    %s = smp.slice %cat {limits = array<i64: 2, 4>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : tensor<2x4xi64> -> tensor<2x3xi64>
    %flat = smp.reshape %s : tensor<2x3xi64> -> tensor<6xi64>
    %z = smp.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
    %zf = smp.reshape %z : tensor<2x3x5xf32> -> tensor<6x5xf32>
    %ce = smp.cross_entropy %zf, %flat : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// An NLL loss as the importer composes it: the picks weighed 0 where the
// label is -100, over the count of the others; plus a term without the
// batch (a weight's squares) and a literal scaling. Not a cross-entropy
// op: which labels it counts is not followed.
// CHECK-LABEL: module attributes {smp.eval_no_count = "its loss is neither a cross-entropy mean without class weights, scaled or offset by values the batch does not change, nor a sum over the samples", smp.eval_pad_labels = "t"}
module {
  func.func @main(%p: tensor<2x3xf32> {smp.input = "p"}, %t: tensor<2xi64> {smp.input = "t"}, %w: tensor<3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %ign = smp.constant dense<-100> : tensor<i64>
    %zero = smp.constant dense<0.0> : tensor<f32>
    %one = smp.constant dense<1.0> : tensor<f32>
    %half = smp.constant dense<0.5> : tensor<f32>
    %eq = smp.equal %t, %ign : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
    %wt = smp.where %eq, %zero, %one : (tensor<2xi1>, tensor<f32>, tensor<f32>) -> tensor<2xf32>
    %pick = smp.reduce_max %p {axes = array<i64: 1>, keepdims = false} : tensor<2x3xf32> -> tensor<2xf32>
    %neg = smp.neg %pick : tensor<2xf32>
    %term = smp.mul %neg, %wt : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %num = smp.reduce_sum %term {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    %den = smp.reduce_sum %wt {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    %mean = smp.div %num, %den : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %sq = smp.mul %w, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %reg = smp.reduce_sum %sq {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
    %sum = smp.add %mean, %reg : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %loss = smp.mul %sum, %half : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// The count of the labels kept, (t != -100) as a float, as a denominator.
// CHECK-LABEL: module attributes {smp.eval_no_count = "its loss is neither a cross-entropy mean without class weights, scaled or offset by values the batch does not change, nor a sum over the samples", smp.eval_pad_labels = "t"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %ign = smp.constant dense<-100> : tensor<i64>
    %ce = smp.cross_entropy %x, %t {reduction = #smp<reduction sum>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %eq = smp.equal %t, %ign : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
    %ne = smp.not %eq : tensor<2xi1>
    %kept = smp.cast %ne : tensor<2xi1> to tensor<2xf32>
    %n = smp.reduce_sum %kept {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    %loss = smp.div %ce, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %loss : tensor<f32>
  }
}

// -----

// A mean over every sample counts the padding.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' averages with 'smp.reduce_mean' over every element, the padding samples' included"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %ce = smp.cross_entropy %x, %t {reduction = #smp<reduction none>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
    %m = smp.reduce_mean %ce {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %m : tensor<f32>
  }
}

// -----

// A cross-entropy that ignores another label than the padding's.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' is a cross-entropy that ignores the label 3, not -100 (the padding's)"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %ce = smp.cross_entropy %x, %t {ignore_index = 3 : i64} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// Labels computed from the input (t + 1): padding's -100 becomes -99.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' is a cross-entropy whose labels are not an input's values (sliced, reshaped or shifted), which padding could set to -100"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %one = smp.constant dense<1> : tensor<i64>
    %t1 = smp.add %t, %one : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
    %ce = smp.cross_entropy %x, %t1 : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// Two cross-entropies over two label inputs: padding sets one.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' reads labels from two inputs ('a' and 'b'), and padding sets one"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %a: tensor<2xi64> {smp.input = "a"}, %b: tensor<2xi64> {smp.input = "b"}) -> (tensor<f32> {smp.output = "loss"}) {
    %ca = smp.cross_entropy %x, %a : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %cb = smp.cross_entropy %x, %b : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %s = smp.add %ca, %cb : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Logits that mix the samples (a softmax over the batch dim).
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' is a cross-entropy whose logits are not computed sample by sample ('smp.softmax' {{.*}}, mixing the batch's samples)"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %s = smp.softmax %x {axis = 0 : i64} : tensor<2x3xf32>
    %ce = smp.cross_entropy %s, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// Class weights computed from the batch.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' is a cross-entropy whose class weights are computed from the batch"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %cw = smp.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : tensor<2x3xf32> -> tensor<3xf32>
    %ce = smp.cross_entropy %x, %t, %cw : (tensor<2x3xf32>, tensor<2xi64>, tensor<3xf32>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// A constant folded from the batch's shape (marked by smpc's second import
// at twice the batch), and one smpc could not tell.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' divides by a value folded from the batch's shape (x.size(0)): a padded batch's is the global batch, not the short one"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %two = smp.constant dense<2.0> : tensor<f32>
    %ce = smp.cross_entropy %x, %t {reduction = #smp<reduction sum>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %m = smp.div %ce, %two {smp.batch_scaled = 1 : i64} : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %m : tensor<f32>
  }
}

// -----

// CHECK-LABEL: module attributes {smp.batch_scaling_unknown, smp.eval_no_pad = "the model's own loss output 'loss' multiplies by a constant that smp cannot tell from one folded from the batch's shape (x.size(0)), which a padded batch holds at the global batch"}
module attributes {smp.batch_scaling_unknown} {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %k = smp.constant dense<0.5> : tensor<f32>
    %ce = smp.cross_entropy %x, %t {reduction = #smp<reduction sum>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %m = smp.mul %k, %ce : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %m : tensor<f32>
  }
}

// -----

// A sum of what padding samples change (an own mean-squared error), and a
// masked mean whose mask (t != 0) is 1 there: its numerator leaves the
// padding out (the cross-entropy's), its denominator counts it.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' sums values with 'smp.reduce_sum' that padding samples change (they leave out only a cross-entropy's labels -100 and what vanishes there)"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2x3xf32> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %d = smp.sub %x, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %sq = smp.mul %d, %d : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %s = smp.reduce_sum %sq {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' sums values with 'smp.reduce_sum' {{.*}}"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %zero = smp.constant dense<0> : tensor<i64>
    %ce = smp.cross_entropy %x, %t {reduction = #smp<reduction none>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
    %eq = smp.equal %t, %zero : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
    %ne = smp.not %eq : tensor<2xi1>
    %mask = smp.cast %ne : tensor<2xi1> to tensor<2xf32>
    %e = smp.mul %ce, %mask : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %s = smp.reduce_sum %e {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    %n = smp.reduce_sum %mask {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    %m = smp.div %s, %n : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %m : tensor<f32>
  }
}

// -----

// An op the analysis does not read, and a loss without labels.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' is computed by 'smp.reduce_max', which smp cannot tell to leave padding samples out"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %ce = smp.cross_entropy %x, %t {reduction = #smp<reduction none>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2xf32>
    %m = smp.reduce_max %ce {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
    return %m : tensor<f32>
  }
}

// -----

// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' reads no labels that padding could set to -100"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %w: tensor<3xf32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %sq = smp.mul %w, %w : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %s = smp.reduce_sum %sq {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// T5's: the labels flattened into a cross-entropy mean, scaled and offset
// by what the batch does not change (a parameter, a literal): every label
// counts.
// CHECK-LABEL: module attributes {smp.eval_counted_labels = array<i64: 0, 3>, smp.eval_pad_labels = "t"}
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}, %t: tensor<2x3xi32> {smp.input = "t"}, %w: tensor<f32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %two = smp.constant dense<2.0> : tensor<f32>
    %xf = smp.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %t64 = smp.cast %t : tensor<2x3xi32> to tensor<2x3xi64>
    %tf = smp.reshape %t64 : tensor<2x3xi64> -> tensor<6xi64>
    %ce = smp.cross_entropy %xf, %tf : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<f32>
    %a = smp.mul %w, %ce : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %b = smp.div %a, %two : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %c = smp.sub %w, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %n = smp.neg %c : tensor<f32>
    return %n : tensor<f32>
  }
}

// -----

// The first of each pair of labels (a slice), of a sample whose labels are
// 2-D: flat positions 0, 2 and 4.
// CHECK-LABEL: module attributes {smp.eval_counted_labels = array<i64: 0, 1, 2, 3, 4, 5>, smp.eval_pad_labels = "t"}
module {
  func.func @main(%x: tensor<2x3x4xf32> {smp.input = "x"}, %t: tensor<2x3x2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %s = smp.slice %t {limits = array<i64: 2, 3, 1>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : tensor<2x3x2xi64> -> tensor<2x3x1xi64>
    %tf = smp.reshape %s : tensor<2x3x1xi64> -> tensor<6xi64>
    %xf = smp.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %ce = smp.cross_entropy %xf, %tf : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// Two cross-entropy means over one input's labels: a sum of two means is
// not one mean over the labels counted.
// CHECK-LABEL: module attributes {smp.eval_no_count = "its loss is neither a cross-entropy mean without class weights, scaled or offset by values the batch does not change, nor a sum over the samples", smp.eval_pad_labels = "t"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %y: tensor<2x3xf32> {smp.input = "y"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %a = smp.cross_entropy %x, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %b = smp.cross_entropy %y, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %s = smp.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// Constant class weights: the mean divides by the weights' sum, not the
// count.
// CHECK-LABEL: module attributes {smp.eval_no_count = "its loss is neither a cross-entropy mean without class weights, scaled or offset by values the batch does not change, nor a sum over the samples", smp.eval_pad_labels = "t"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %cw = smp.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
    %ce = smp.cross_entropy %x, %t, %cw : (tensor<2x3xf32>, tensor<2xi64>, tensor<3xf32>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// Labels transposed within the sample: not followed.
// CHECK-LABEL: module attributes {smp.eval_no_count = "its cross-entropy's labels are not the input 't' moved by slices, reshapes and concatenations with -100", smp.eval_pad_labels = "t"}
module {
  func.func @main(%x: tensor<2x6x4xf32> {smp.input = "x"}, %t: tensor<2x3x2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %tt = smp.transpose %t {perm = array<i64: 0, 2, 1>} : tensor<2x3x2xi64> -> tensor<2x2x3xi64>
    %tf = smp.reshape %tt : tensor<2x2x3xi64> -> tensor<12xi64>
    %xf = smp.reshape %x : tensor<2x6x4xf32> -> tensor<12x4xf32>
    %ce = smp.cross_entropy %xf, %tf : (tensor<12x4xf32>, tensor<12xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// Each label read twice (the labels concatenated with themselves).
// CHECK-LABEL: module attributes {smp.eval_no_count = "its cross-entropy reads a label of the input 't' twice", smp.eval_pad_labels = "t"}
module {
  func.func @main(%x: tensor<2x2x4xf32> {smp.input = "x"}, %t: tensor<2x1xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %tt = smp.concat %t, %t {axis = 1 : i64} : (tensor<2x1xi64>, tensor<2x1xi64>) -> tensor<2x2xi64>
    %tf = smp.reshape %tt : tensor<2x2xi64> -> tensor<4xi64>
    %xf = smp.reshape %x : tensor<2x2x4xf32> -> tensor<4x4xf32>
    %ce = smp.cross_entropy %xf, %tf : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// A language model whose loss reads the labels from its own input ids
// (F.cross_entropy(logits[:, :-1], idx[:, 1:])): padding's -100 would be an
// embedding's index.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' reads its labels from the input 'idx', which the model also reads with 'smp.gather', where padding's -100 is not a value it takes"}
module {
  func.func @main(%idx: tensor<2x3xi64> {smp.input = "idx"}, %e: tensor<5x4xf32> {smp.param = "e"}) -> (tensor<f32> {smp.output = "loss"}) {
    %x = smp.gather %e, %idx {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %xs = smp.slice %x {limits = array<i64: 2, 2, 4>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>} : tensor<2x3x4xf32> -> tensor<2x2x4xf32>
    %xf = smp.reshape %xs : tensor<2x2x4xf32> -> tensor<4x4xf32>
    %ls = smp.slice %idx {limits = array<i64: 2, 3>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>} : tensor<2x3xi64> -> tensor<2x2xi64>
    %lf = smp.reshape %ls : tensor<2x2xi64> -> tensor<4xi64>
    %ce = smp.cross_entropy %xf, %lf : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// T5's and BART's decoder inputs: the labels shifted right after a start
// token, their -100s replaced by the pad token
// (shifted.masked_fill(shifted == -100, pad)), embedded: padding's -100s
// never reach the embedding.
// CHECK-LABEL: module attributes {smp.eval_counted_labels = array<i64: 0, 3>, smp.eval_pad_labels = "labels"}
module {
  func.func @main(%l: tensor<2x3xi64> {smp.input = "labels"}, %e: tensor<5x4xf32> {smp.param = "e"}) -> (tensor<f32> {smp.output = "loss"}) {
    %start = smp.constant dense<0> : tensor<2x1xi64>
    %ign = smp.constant dense<-100> : tensor<i64>
    %pad = smp.constant dense<1> : tensor<i64>
    %ls = smp.slice %l {limits = array<i64: 2, 2>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x3xi64> -> tensor<2x2xi64>
    %sh = smp.concat %start, %ls {axis = 1 : i64} : (tensor<2x1xi64>, tensor<2x2xi64>) -> tensor<2x3xi64>
    %eq = smp.equal %sh, %ign : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi1>
    %dec = smp.where %eq, %pad, %sh : (tensor<2x3xi1>, tensor<i64>, tensor<2x3xi64>) -> tensor<2x3xi64>
    %x = smp.gather %e, %dec {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %xf = smp.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %lf = smp.reshape %l : tensor<2x3xi64> -> tensor<6xi64>
    %ce = smp.cross_entropy %xf, %lf : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// The same without the replacement: the -100s reach the embedding.
// CHECK-LABEL: module attributes {smp.eval_no_pad = "the model's own loss output 'loss' reads its labels from the input 'labels', which the model also reads with 'smp.gather', where padding's -100 is not a value it takes"}
module {
  func.func @main(%l: tensor<2x3xi64> {smp.input = "labels"}, %e: tensor<5x4xf32> {smp.param = "e"}) -> (tensor<f32> {smp.output = "loss"}) {
    %start = smp.constant dense<0> : tensor<2x1xi64>
    %ls = smp.slice %l {limits = array<i64: 2, 2>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x3xi64> -> tensor<2x2xi64>
    %sh = smp.concat %start, %ls {axis = 1 : i64} : (tensor<2x1xi64>, tensor<2x2xi64>) -> tensor<2x3xi64>
    %x = smp.gather %e, %sh {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
    %xf = smp.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
    %lf = smp.reshape %l : tensor<2x3xi64> -> tensor<6xi64>
    %ce = smp.cross_entropy %xf, %lf : (tensor<6x4xf32>, tensor<6xi64>) -> tensor<f32>
    return %ce : tensor<f32>
  }
}

// -----

// A sum over the samples (a cross-entropy with reduction='sum', divided by
// a literal): an evaluation batch's loss is the sum of its parts'.
// CHECK-LABEL: module attributes {smp.eval_loss_sums, smp.eval_pad_labels = "t"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}) -> (tensor<f32> {smp.output = "loss"}) {
    %four = smp.constant dense<4.0> : tensor<f32>
    %ce = smp.cross_entropy %x, %t {reduction = #smp<reduction sum>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %m = smp.div %ce, %four : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %m : tensor<f32>
  }
}

// -----

// A sum plus a term the batch does not change: neither a sum over the
// samples nor a mean.
// CHECK-LABEL: module attributes {smp.eval_no_count = "its loss is neither a cross-entropy mean without class weights, scaled or offset by values the batch does not change, nor a sum over the samples", smp.eval_pad_labels = "t"}
module {
  func.func @main(%x: tensor<2x3xf32> {smp.input = "x"}, %t: tensor<2xi64> {smp.input = "t"}, %w: tensor<f32> {smp.param = "w"}) -> (tensor<f32> {smp.output = "loss"}) {
    %ce = smp.cross_entropy %x, %t {reduction = #smp<reduction sum>} : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    %m = smp.add %ce, %w : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %m : tensor<f32>
  }
}
