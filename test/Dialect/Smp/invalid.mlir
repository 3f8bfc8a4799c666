// RUN: smp-opt %s -split-input-file -verify-diagnostics

func.func @broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{'smp.add' cannot broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.add %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @element_types(%a: tensor<2xf32>, %b: tensor<2xi64>) {
  // expected-error @+2 {{'smp.mul' operands have different element types}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.mul %a, %b : (tensor<2xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @wrong_result(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'smp.add' op failed to infer returned types}}
  // expected-error @+1 {{'smp.add' op inferred type(s) 'tensor<2x3xf32>' are incompatible with return type(s) of operation 'tensor<3x2xf32>'}}
  %0 = smp.add %a, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @compare_result(%a: tensor<2xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = smp.less %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @float_only(%a: tensor<2xi64>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %0 = smp.exp %a : tensor<2xi64>
  return
}

// -----

func.func @matmul_k(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+2 {{'smp.matmul' contraction mismatch}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.matmul %a, %b : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<3x3x4xf32>) {
  // expected-error @+2 {{'smp.matmul' batch dims}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.matmul %a, %b : (tensor<2x2x3xf32>, tensor<3x3x4xf32>) -> tensor<2x2x4xf32>
  return
}

// -----

func.func @matmul_bias_width(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<4xf32>) {
  // expected-error @+2 {{'smp.matmul_bias' bias 'tensor<4xf32>' is neither [5] nor [1, ..., 1, 5] for the product 'tensor<2x5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.matmul_bias %a, %b, %c : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<4xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_bias_column(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<2x5xf32>) {
  // expected-error @+2 {{'smp.matmul_bias' bias 'tensor<2x5xf32>' is neither [5] nor [1, ..., 1, 5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.matmul_bias %a, %b, %c : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_bias_type(%a: tensor<2x3xbf16>, %b: tensor<3x5xbf16>, %c: tensor<5xf32>) {
  // expected-error @+2 {{'smp.matmul_bias' bias element type 'f32' is not the product's 'bf16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.matmul_bias %a, %b, %c : (tensor<2x3xbf16>, tensor<3x5xbf16>, tensor<5xf32>) -> tensor<2x5xbf16>
  return
}

// -----

func.func @matmul_bias_vector(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2xf32>) {
  // expected-error @+2 {{'smp.matmul_bias' needs a rhs of rank 2 or more}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.matmul_bias %a, %b, %c : (tensor<2x3xf32>, tensor<3xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @matmul_bias_k(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>, %c: tensor<5xf32>) {
  // expected-error @+2 {{'smp.matmul_bias' contraction mismatch}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.matmul_bias %a, %b, %c : (tensor<2x3xf32>, tensor<4x5xf32>, tensor<5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @cross_entropy_wide_loss(%a: tensor<2x8xf16>, %y: tensor<2xi64>) {
  // A loss wider than the logits: f32 for f16/bf16 logits only.
  // expected-error @+2 {{'smp.cross_entropy' op inferred type(s) 'tensor<f16>' are incompatible with return type(s) of operation 'tensor<f64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy %a, %y : (tensor<2x8xf16>, tensor<2xi64>) -> tensor<f64>
  return
}

// -----

func.func @cross_entropy_narrow_loss(%a: tensor<2x8xf32>, %y: tensor<2xi64>) {
  // expected-error @+2 {{'smp.cross_entropy' op inferred type(s) 'tensor<f32>' are incompatible with return type(s) of operation 'tensor<bf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy %a, %y : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<bf16>
  return
}

// -----

func.func @reduce_axis(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{reduction axis 2 out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.reduce_sum %a {axes = array<i64: 2>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_repeat(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{reduction axis -1 repeated}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.reduce_max %a {axes = array<i64: 1, -1>} : tensor<2x3xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @softmax_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'smp.softmax' op axis 2 out of range for rank 2}}
  %0 = smp.softmax %a {axis = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @layer_norm_scale(%a: tensor<2x3xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{'smp.layer_norm' scale 'tensor<4xf32>' does not match normalized shape 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.layer_norm %a, %s {axis = -1 : i64, epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @rms_norm_scale(%a: tensor<2x3xf32>, %s: tensor<2x3xf32>) {
  // expected-error @+2 {{'smp.rms_norm' scale 'tensor<2x3xf32>' does not match normalized shape 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.rms_norm %a, %s {epsilon = 1.0e-5 : f32} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @batch_norm(%a: tensor<2x3x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+2 {{'smp.batch_norm' per-channel operand 'tensor<4xf32>' does not match 3 channels}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.batch_norm %a, %c, %c, %c, %c {epsilon = 1.0e-5 : f32} : (tensor<2x3x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  return
}

// -----

func.func @cross_entropy(%l: tensor<4x10xf32>, %y: tensor<5xi64>) {
  // expected-error @+2 {{'smp.cross_entropy' labels 'tensor<5xi64>' must have the shape of logits 'tensor<4x10xf32>' without its last (class) dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<5xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_shard_labels(%l: tensor<4x10xf32>, %y: tensor<5xi64>, %o: tensor<i64>) {
  // expected-error @+2 {{'smp.cross_entropy_shard' labels 'tensor<5xi64>' do not match logits 'tensor<4x10xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy_shard %l, %y, %o {classes = 30 : i64} : (tensor<4x10xf32>, tensor<5xi64>, tensor<i64>) -> tensor<4x2xf32>
  return
}

// -----

func.func @cross_entropy_shard_offset(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %o: tensor<2xi64>) {
  // The offset is this rank's first class: one element.
  // expected-error @+2 {{'smp.cross_entropy_shard' offset must have one element, not 'tensor<2xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy_shard %l, %y, %o {classes = 30 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<2xi64>) -> tensor<4x2xf32>
  return
}

// -----

func.func @cross_entropy_shard_stats(%l: tensor<4x10xbf16>, %y: tensor<4xi64>, %o: tensor<i64>, %s: tensor<4x2xbf16>) {
  // The statistics of bf16 logits are f32.
  // expected-error @+2 {{'smp.cross_entropy_shard_grad' statistics and their gradient must be 'tensor<4x2xf32>', not 'tensor<4x2xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy_shard_grad %l, %y, %o, %s, %s {classes = 30 : i64} : (tensor<4x10xbf16>, tensor<4xi64>, tensor<i64>, tensor<4x2xbf16>, tensor<4x2xbf16>) -> tensor<4x10xbf16>
  return
}

// -----

func.func @label_rank_target(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %o: tensor<i64>, %t: tensor<4x1xf32>) {
  // The label logits have the labels' shape.
  // expected-error @+2 {{'smp.label_rank' target 'tensor<4x1xf32>' does not match labels 'tensor<4xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.label_rank %l, %y, %o target %t {classes = 30 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<i64>, tensor<4x1xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @label_rank_labels(%l: tensor<4x10xf32>, %y: tensor<4x1xi64>, %o: tensor<i64>) {
  // expected-error @+2 {{'smp.label_rank' labels 'tensor<4x1xi64>' do not match logits 'tensor<4x10xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.label_rank %l, %y, %o {classes = 10 : i64} : (tensor<4x10xf32>, tensor<4x1xi64>, tensor<i64>) -> tensor<4x1xf32>
  return
}

// -----

func.func @cross_entropy_classes(%l: tensor<4x10xf32>, %y: tensor<4xi64>) {
  // More classes than a row of logits holds (smp-pad-classes pads rows).
  // expected-error @+2 {{'smp.cross_entropy' classes = 11 must be in [1, 10], the last dim of 'tensor<4x10xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy %l, %y {classes = 11 : i64} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_class_weights(%l: tensor<4x16xf32>, %y: tensor<4xi64>, %w: tensor<16xf32>) {
  // Class weights range over the classes, not the padded row.
  // expected-error @+2 {{'smp.cross_entropy' weights 'tensor<16xf32>' must be a vector of the 13 classes of 'tensor<4x16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy %l, %y, %w {classes = 13 : i64} : (tensor<4x16xf32>, tensor<4xi64>, tensor<16xf32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_classes(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %g: tensor<f32>) {
  // expected-error @+2 {{'smp.cross_entropy_grad' classes = 0 must be in [1, 10], the last dim of 'tensor<4x10xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy_grad %l, %y, %g {classes = 0 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<f32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @cross_entropy_weights(%l: tensor<4x10xf32>, %y: tensor<4xi64>, %w: tensor<9xf32>) {
  // expected-error @+2 {{'smp.cross_entropy' weights 'tensor<9xf32>' must be a vector of the 10 classes of 'tensor<4x10xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.cross_entropy %l, %y, %w : (tensor<4x10xf32>, tensor<4xi64>, tensor<9xf32>) -> tensor<f32>
  return
}

// -----

func.func @reshape_count(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'smp.reshape' op cannot reshape 'tensor<2x3xf32>' (6 elements) to 'tensor<7xf32>' (7 elements)}}
  %0 = smp.reshape %a : tensor<2x3xf32> -> tensor<7xf32>
  return
}

// -----

func.func @reshape_dynamic(%a: tensor<?x3xf32>) {
  // expected-error @+1 {{'smp.reshape' op requires static shapes}}
  %0 = smp.reshape %a : tensor<?x3xf32> -> tensor<3x?xf32>
  return
}

// -----

func.func @tile_rank(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'smp.tile' op failed to infer returned types}}
  // expected-error @+1 {{'smp.tile' has 1 repeats for rank 2}}
  %0 = smp.tile %a {repeats = array<i64: 2>} : tensor<2x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @tile_negative(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'smp.tile' op failed to infer returned types}}
  // expected-error @+1 {{'smp.tile' invalid repeat -1 of a dim of size 2}}
  %0 = smp.tile %a {repeats = array<i64: -1, 1>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @tile_result(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'smp.tile' op failed to infer returned types}}
  // expected-error @+1 {{'smp.tile' op inferred type(s) 'tensor<4x3xf32>' are incompatible with return type(s) of operation 'tensor<4x6xf32>'}}
  %0 = smp.tile %a {repeats = array<i64: 2, 1>} : tensor<2x3xf32> -> tensor<4x6xf32>
  return
}

// -----

func.func @expand(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'smp.expand' op cannot broadcast 'tensor<2x3xf32>' to 'tensor<4x3xf32>'}}
  %0 = smp.expand %a : tensor<2x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @transpose(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{'smp.transpose' invalid permutation}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.transpose %a {perm = array<i64: 0, 0>} : tensor<2x3xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @slice_bounds(%a: tensor<4xf32>) {
  // expected-error @+2 {{'smp.slice' bounds [0, 5) out of range in dim 0 of size 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.slice %a {starts = array<i64: 0>, limits = array<i64: 5>, steps = array<i64: 1>} : tensor<4xf32> -> tensor<5xf32>
  return
}

// -----

func.func @slice_step(%a: tensor<4xf32>) {
  // expected-error @+2 {{'smp.slice' step 0 in dim 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.slice %a {starts = array<i64: 0>, limits = array<i64: 4>, steps = array<i64: 0>} : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @concat(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) {
  // expected-error @+2 {{'smp.concat' operand 'tensor<3x3xf32>' differs from 'tensor<2x3xf32>' in dim 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @split(%a: tensor<6xf32>) {
  // expected-error @+2 {{'smp.split' sizes sum to 5 but dim 0 of 'tensor<6xf32>' is 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = smp.split %a {axis = 0 : i64, sizes = array<i64: 2, 3>} : tensor<6xf32> -> tensor<2xf32>, tensor<3xf32>
  return
}

// -----

func.func @gather(%a: tensor<6xf32>, %i: tensor<2xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of signless integer values}}
  %0 = smp.gather %a, %i {axis = 0 : i64} : (tensor<6xf32>, tensor<2xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @trilu(%a: tensor<6xf32>) {
  // expected-error @+1 {{'smp.trilu' op input must have rank >= 2}}
  %0 = smp.trilu %a {upper = true, k = 0 : i64} : tensor<6xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{'smp.conv' input channels 3 do not match weight 'tensor<4x2x3x3xf32>' with group 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.conv %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @pool_window(%x: tensor<1x3x2x2xf32>) {
  // expected-error @+2 {{'smp.max_pool' window 3 (stride 1, dilation 1) does not fit spatial dim 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.max_pool %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : tensor<1x3x2x2xf32> -> tensor<1x3x1x1xf32>
  return
}

// -----

// expected-error @+1 {{'smp.param' must be a non-empty string naming the parameter}}
func.func @param_attr(%a: tensor<2xf32> {smp.param = ""}) {
  return
}

// -----

// expected-error @+1 {{unknown smp argument attribute 'smp.bogus'}}
func.func @unknown_arg_attr(%a: tensor<2xf32> {smp.bogus = 1}) {
  return
}

// -----

// expected-error @+1 {{'smp.output' must be a non-empty string naming the graph output}}
func.func @output_attr(%a: tensor<2xf32>) -> (tensor<2xf32> {smp.output = 3}) {
  return %a : tensor<2xf32>
}

// -----

// expected-error @+1 {{'smp.opset' must be an integer}}
module attributes {smp.opset = "17"} {
}

// -----

// A ZeRO-3 gather's number (smp-shard-parameters).
func.func @copy_attr(%a: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'smp.copy' must be an integer}}
  %b = smp.add %a, %a {smp.copy = "0"} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %b : tensor<2xf32>
}

// -----

// A gradient bucket's part that the artifact may view (smp-shard-gradients).
func.func @view_attr(%a: tensor<4xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'smp.view' must be a unit attribute}}
  %b = smp.slice %a {starts = array<i64: 0>, limits = array<i64: 2>, steps = array<i64: 1>, smp.view = 1 : i64} : tensor<4xf32> -> tensor<2xf32>
  return %b : tensor<2xf32>
}

// -----

// expected-error @+1 {{'smp.model' must be a non-empty string naming the generated model's kind}}
module attributes {smp.model = ""} {
}

// -----

// expected-error @+1 {{'smp.model_config' must be a dictionary of integers (the generated model's sizes)}}
module attributes {smp.model = "gpt", smp.model_config = {layers = 2 : i64, hidden = "32"}} {
}

// -----

// expected-error @+1 {{'smp.model_config' must be a dictionary of integers (the generated model's sizes)}}
module attributes {smp.model_config = [1, 2]} {
}

// -----

// expected-error @+1 {{'smp.eval_pad_labels' must be a non-empty string naming the labels input}}
module attributes {smp.eval_pad_labels = ""} {
}

// -----

// expected-error @+1 {{'smp.eval_no_pad' must be a non-empty string saying why}}
module attributes {smp.eval_no_pad = 1 : i64} {
}

// -----

func.func @bias_gelu_grad_shape(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{'smp.bias_gelu_grad' op bias_grad 'tensor<1x8xf32>' is neither [8] nor [1, ..., 1, 8]}}
  %g, %b = smp.bias_gelu_grad %x, %x : tensor<2x4x8xf32> -> tensor<1x8xf32>
  return
}

// -----

func.func @bias_gelu_grad_type(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'smp.bias_gelu_grad' op bias_grad element type 'bf16' is not the input's 'f32'}}
  %g, %b = smp.bias_gelu_grad %x, %x : tensor<2x8xf32> -> tensor<8xbf16>
  return
}

// -----

func.func @norm_grad_residual(%x: tensor<2x8xf32>, %w: tensor<8xf32>, %r: tensor<8xf32>) {
  // expected-error @+2 {{'smp.rms_norm_grad' residual 'tensor<8xf32>' does not match input 'tensor<2x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %g, %s = smp.rms_norm_grad %x, %w, %x residual %r {epsilon = 1.0e-6 : f32} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @adam_grad_type(%p: tensor<8xf16>, %g: tensor<8xbf16>, %lr: tensor<f32>) {
  // expected-error @+1 {{'smp.adam_update' op gradient 'tensor<8xbf16>' must have the parameter's type 'tensor<8xf16>' (or f16/bf16 for an f32 parameter)}}
  %np, %nm, %nv = smp.adam_update %p, %g, %p, %p, %lr, %lr : tensor<8xf16>, tensor<f32> grad tensor<8xbf16>
  return
}

// -----

func.func @adam_grad_shape(%p: tensor<8xf32>, %g: tensor<4xbf16>, %lr: tensor<f32>) {
  // expected-error @+1 {{'smp.adam_update' op gradient 'tensor<4xbf16>' does not have the shape of the parameter 'tensor<8xf32>'}}
  %np, %nm, %nv = smp.adam_update %p, %g, %p, %p, %lr, %lr : tensor<8xf32>, tensor<f32> grad tensor<4xbf16>
  return
}

// -----

func.func @adam_multi_groups(%p: tensor<8xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'smp.adam_update_multi' op has 2 parameters but a group of 1 (grads, exp_avgs, exp_avg_sqs and the three results take one per parameter)}}
  %a:2, %b:2, %c:2 = smp.adam_update_multi params(%p, %p) grads(%p) exp_avgs(%p, %p) exp_avg_sqs(%p, %p) lr %lr step %lr : (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>) (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>, tensor<8xf32>) tensor<f32> -> (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @adam_multi_state(%p: tensor<8xf32>, %m: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'smp.adam_update_multi' op parameter #1 is 'tensor<8xf32>' but its state or result is 'tensor<4xf32>'}}
  %a:2, %b:2, %c:2 = smp.adam_update_multi params(%p, %p) grads(%p, %p) exp_avgs(%p, %m) exp_avg_sqs(%p, %p) lr %lr step %lr : (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>, tensor<4xf32>) (tensor<8xf32>, tensor<8xf32>) tensor<f32> -> (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @adam_multi_grad(%p: tensor<8xf32>, %g: tensor<4xbf16>, %lr: tensor<f32>) {
  // expected-error @+1 {{'smp.adam_update_multi' op gradient 'tensor<4xbf16>' does not have the shape of the parameter 'tensor<8xf32>'}}
  %a:1, %b:1, %c:1 = smp.adam_update_multi params(%p) grads(%g) exp_avgs(%p) exp_avg_sqs(%p) lr %lr step %lr : (tensor<8xf32>) (tensor<4xbf16>) (tensor<8xf32>) (tensor<8xf32>) tensor<f32> -> (tensor<8xf32>) (tensor<8xf32>) (tensor<8xf32>)
  return
}

// -----

func.func @adam_multi_empty(%lr: tensor<f32>) {
  // expected-error @+1 {{'smp.adam_update_multi' op needs at least one parameter}}
  "smp.adam_update_multi"(%lr, %lr) <{operandSegmentSizes = array<i32: 0, 0, 0, 0, 1, 1, 0>, resultSegmentSizes = array<i32: 0, 0, 0>}> : (tensor<f32>, tensor<f32>) -> ()
  return
}

// -----

func.func @cast_multi_count(%x: tensor<8xf32>) {
  // expected-error @+1 {{'smp.cast_multi' op has 2 inputs but 1 results}}
  %c = smp.cast_multi %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xbf16>
  return
}

// -----

func.func @add_multi_count(%x: tensor<8xf32>) {
  // expected-error @+1 {{'smp.add_multi' op has 3 inputs but 1 results (two inputs a result)}}
  %c = smp.add_multi %x, %x, %x : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @add_multi_result(%x: tensor<8xbf16>) {
  // expected-error @+1 {{'smp.add_multi' op result 'tensor<8xbf16>' is not f32}}
  %c = smp.add_multi %x, %x : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
  return
}

// -----

func.func @add_multi_shape(%x: tensor<8xbf16>, %y: tensor<4xbf16>) {
  // expected-error @+1 {{'smp.add_multi' op input 'tensor<4xbf16>' does not have the shape of its result 'tensor<8xf32>'}}
  %c = smp.add_multi %x, %y : (tensor<8xbf16>, tensor<4xbf16>) -> tensor<8xf32>
  return
}

// -----

func.func @add_multi_f64(%x: tensor<8xf64>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'smp.add_multi' op input 'tensor<8xf64>' is not f32, f16 or bf16}}
  %c = smp.add_multi %x, %y : (tensor<8xf64>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @cast_multi_shape(%x: tensor<8xf32>) {
  // expected-error @+1 {{'smp.cast_multi' op result 'tensor<4xbf16>' does not have the shape of its input 'tensor<8xf32>'}}
  %c = smp.cast_multi %x : (tensor<8xf32>) -> tensor<4xbf16>
  return
}

// -----

func.func @cast_multi_empty() {
  // expected-error @+1 {{'smp.cast_multi' op needs at least one input}}
  smp.cast_multi : () -> ()
  return
}

// -----

func.func @sum_squares_type(%x: tensor<8xf64>) {
  // expected-error @+1 {{'smp.sum_squares' op input 'tensor<8xf64>' is not f32, f16 or bf16}}
  %n = smp.sum_squares %x : (tensor<8xf64>) -> tensor<f32>
  return
}

// -----

func.func @sgd_grad_type(%p: tensor<8xbf16>, %g: tensor<8xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'smp.sgd_update' op gradient 'tensor<8xf32>' must have the parameter's type 'tensor<8xbf16>' (or f16/bf16 for an f32 parameter)}}
  %np, %nb = smp.sgd_update %p, %g, %p, %lr, %lr : tensor<8xbf16>, tensor<f32> grad tensor<8xf32>
  return
}

// -----

func.func @sgd_multi_groups(%p: tensor<8xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'smp.sgd_update_multi' op has 2 parameters but a group of 1 (grads, momentum_buffers and the two results take one per parameter)}}
  %a:2, %b:2 = smp.sgd_update_multi params(%p, %p) grads(%p, %p) momentum_buffers(%p) lr %lr step %lr : (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>) tensor<f32> -> (tensor<8xf32>, tensor<8xf32>) (tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @sgd_multi_state(%p: tensor<8xf32>, %b: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{'smp.sgd_update_multi' op parameter #0 is 'tensor<8xf32>' but its state or result is 'tensor<4xf32>'}}
  %a:1, %c:1 = smp.sgd_update_multi params(%p) grads(%p) momentum_buffers(%b) lr %lr step %lr : (tensor<8xf32>) (tensor<8xf32>) (tensor<4xf32>) tensor<f32> -> (tensor<8xf32>) (tensor<8xf32>)
  return
}

// -----

func.func @matmul_bias_gelu_f32(%a: tensor<2x3xf32>, %b: tensor<3x8xf32>, %c: tensor<8xf32>) {
  // expected-error @+1 {{'smp.matmul_bias_gelu' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type values}}
  %0:2 = smp.matmul_bias_gelu %a, %b, %c : (tensor<2x3xf32>, tensor<3x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>)
  return
}

// -----

func.func @matmul_bias_gelu_width(%a: tensor<2x3xbf16>, %b: tensor<3x8xbf16>, %c: tensor<4xbf16>) {
  // expected-error @+2 {{'smp.matmul_bias_gelu' bias 'tensor<4xbf16>' is neither [8] nor [1, ..., 1, 8] for the product 'tensor<2x8xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = smp.matmul_bias_gelu %a, %b, %c : (tensor<2x3xbf16>, tensor<3x8xbf16>, tensor<4xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>)
  return
}

// -----

func.func @matmul_gelu_grad_preactivation(%a: tensor<2x3xbf16>, %b: tensor<3x8xbf16>, %p: tensor<2x4xbf16>) {
  // expected-error @+1 {{'smp.matmul_gelu_grad' op preactivation 'tensor<2x4xbf16>' and input_grad 'tensor<2x8xbf16>' must both be the product's type 'tensor<2x8xbf16>'}}
  %0:2 = smp.matmul_gelu_grad %a, %b, %p : (tensor<2x3xbf16>, tensor<3x8xbf16>, tensor<2x4xbf16>) -> (tensor<2x8xbf16>, tensor<8xbf16>)
  return
}

// -----

func.func @matmul_gelu_grad_bias(%a: tensor<2x3xbf16>, %b: tensor<3x8xbf16>, %p: tensor<2x8xbf16>) {
  // expected-error @+1 {{'smp.matmul_gelu_grad' op bias_grad 'tensor<2x8xbf16>' is neither [8] nor [1, ..., 1, 8] of the product's element type for the product 'tensor<2x8xbf16>'}}
  %0:2 = smp.matmul_gelu_grad %a, %b, %p : (tensor<2x3xbf16>, tensor<3x8xbf16>, tensor<2x8xbf16>) -> (tensor<2x8xbf16>, tensor<2x8xbf16>)
  return
}

// -----

func.func @matmul_bias_grad_rows(%g: tensor<16x8xbf16>, %x: tensor<12x24xbf16>) {
  // expected-error @+1 {{'smp.matmul_bias_grad' op needs lhs [M, N] and rhs [M, K] of one element type, not 'tensor<16x8xbf16>' and 'tensor<12x24xbf16>'}}
  %0:2 = smp.matmul_bias_grad %g, %x : (tensor<16x8xbf16>, tensor<12x24xbf16>) -> (tensor<8x24xbf16>, tensor<8xbf16>)
  return
}

// -----

func.func @matmul_bias_grad_bias(%g: tensor<16x8xbf16>, %x: tensor<16x24xbf16>) {
  // expected-error @+1 {{'smp.matmul_bias_grad' op bias_grad 'tensor<24xbf16>' is neither [8] nor [1, ..., 1, 8] of lhs's element type}}
  %0:2 = smp.matmul_bias_grad %g, %x : (tensor<16x8xbf16>, tensor<16x24xbf16>) -> (tensor<8x24xbf16>, tensor<24xbf16>)
  return
}

// -----

func.func @matmul_bias_grad_result(%g: tensor<16x8xbf16>, %x: tensor<16x24xbf16>) {
  // expected-error @+1 {{'smp.matmul_bias_grad' op result 'tensor<24x8xbf16>' is not lhs^T rhs 'tensor<8x24xbf16>'}}
  %0:2 = smp.matmul_bias_grad %g, %x : (tensor<16x8xbf16>, tensor<16x24xbf16>) -> (tensor<24x8xbf16>, tensor<8xbf16>)
  return
}

// -----

func.func @matmul_bias_add_addend(%a: tensor<2x3xf32>, %b: tensor<3x8xf32>, %c: tensor<8xf32>, %r: tensor<1x8xf32>) {
  // expected-error @+2 {{'smp.matmul_bias_add' addend 'tensor<1x8xf32>' is not the product's type 'tensor<2x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.matmul_bias_add %a, %b, %c, %r : (tensor<2x3xf32>, tensor<3x8xf32>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @matmul_add_addend(%a: tensor<2x3xbf16>, %b: tensor<3x8xbf16>, %r: tensor<2x8xf32>) {
  // expected-error @+2 {{'smp.matmul_add' addend 'tensor<2x8xf32>' is not the product's type 'tensor<2x8xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = smp.matmul_add %a, %b, %r : (tensor<2x3xbf16>, tensor<3x8xbf16>, tensor<2x8xf32>) -> tensor<2x8xbf16>
  return
}

// -----

func.func @all_slice_multi_count(%x: tensor<8xf32>) {
  // expected-error @+1 {{'smp.all_slice_multi' op has 2 inputs but 1 results}}
  %s = smp.all_slice_multi %x, %x on @dp grid_axes = [0] : (tensor<8xf32>, tensor<8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @all_slice_multi_chunk(%x: tensor<8x2xf32>) {
  // expected-error @+1 {{'smp.all_slice_multi' op result 'tensor<3x2xf32>' is not an equal part of dim 0 of its input 'tensor<8x2xf32>'}}
  %s = smp.all_slice_multi %x on @dp grid_axes = [0] : (tensor<8x2xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @all_slice_multi_parts(%x: tensor<8xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'smp.all_slice_multi' op cuts its inputs in 2 and in 4 parts: one rank count for all}}
  %s:2 = smp.all_slice_multi %x, %y on @dp grid_axes = [0] : (tensor<8xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<2xf32>)
  return
}
