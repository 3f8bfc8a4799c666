//===- SmpTrainingOps.td - Backward ops and optimizer updates -*- tablegen -*-===//
//
// The gradients that are not worth composing from forward ops, the fused
// ones smp-fuse-backward forms, and the optimizer updates. Included by
// SmpOps.td (it uses its tensor constraints, attributes and Smp_Op);
// verifiers and type inference in lib/Dialect/Smp/IR/SmpTrainingOps.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SMPTRAININGOPS_TD
#define SMP_DIALECT_SMP_IR_SMPTRAININGOPS_TD

//===----------------------------------------------------------------------===//
// Backward ops (vector-Jacobian products that are not worth composing)
//===----------------------------------------------------------------------===//

def Smp_GeluGradOp : Smp_Op<"gelu_grad", [Pure, AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "dy * gelu'(x)";
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$grad,
                   DefaultValuedAttr<Smp_GeluApproximationAttr,
                       "::smp::GeluApproximation::none">:$approximate);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def Smp_BiasGeluGradOp : Smp_Op<"bias_gelu_grad", [Pure,
    AllTypesMatch<["input", "grad", "input_grad"]>]> {
  let summary = "gelu_grad and its sum over the leading dims, in one pass";
  let description = [{
    `input_grad = grad * gelu'(input)` as `smp.gelu_grad`, and `bias_grad`,
    the sum of `input_grad` over every dim but the last: the gradient of a
    bias added before the GELU (`gelu(x W + b)`). `smp-fuse-backward` forms
    it from `reduce_sum(gelu_grad(x, dy))`; the kernel sums each column in
    row order, as reduce_sum does, so the bits are the unfused pair's.
    `bias_grad` is `[N]` or `[1, ..., 1, N]` (N the last dim).
  }];
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$grad,
                   DefaultValuedAttr<Smp_GeluApproximationAttr,
                       "::smp::GeluApproximation::none">:$approximate);
  let results = (outs Smp_FloatTensor:$input_grad,
                      Smp_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $grad attr-dict `:` type($input) `->` type($bias_grad)
  }];
  let hasVerifier = 1;
}

def Smp_LayerNormGradOp : Smp_Op<"layer_norm_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of layer_norm: (dx, dscale, dbias)";
  let description = [{
    Recomputes the statistics of `input` over dims [axis, rank) and returns
    the gradients of the input, the scale and the bias (dbias is the sum of
    `grad` over the leading dims, shaped like the scale). With `residual`
    (the gradient that flows around the norm in a residual block), the
    input gradient is `residual + dx`, rounded as the separate `smp.add`
    would round it; `smp-fuse-backward` folds that add in.
  }];
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$scale,
                   Smp_FloatTensor:$grad, Optional<Smp_FloatTensor>:$residual,
                   I64Attr:$axis, F32Attr:$epsilon);
  let results = (outs Smp_FloatTensor:$input_grad, Smp_FloatTensor:$scale_grad,
                      Smp_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad (`residual` $residual^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Smp_RmsNormGradOp : Smp_Op<"rms_norm_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradients of rms_norm: (dx, dscale)";
  let description = [{
    `residual`, when given, is added to dx as in `smp.layer_norm_grad`.
  }];
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$scale,
                   Smp_FloatTensor:$grad, Optional<Smp_FloatTensor>:$residual,
                   F32Attr:$epsilon);
  let results = (outs Smp_FloatTensor:$input_grad, Smp_FloatTensor:$scale_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad (`residual` $residual^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Smp_CrossEntropyGradOp : Smp_Op<"cross_entropy_grad", [Pure, InferTypeOpAdaptor]> {
  let summary = "Gradient of cross_entropy with respect to the logits";
  let description = [{
    (softmax(logits) - onehot(labels)) scaled by the incoming gradient (a
    scalar for sum/mean, one value per label for none), the class weight and,
    for mean, 1 / (number or weight of the labels not ignored). With
    `classes` as for cross_entropy, the padding past a row's classes gets a
    zero gradient.
  }];
  let arguments = (ins Smp_FloatTensor:$logits, Smp_IntTensor:$labels,
                   Optional<Smp_FloatTensor>:$weights, Smp_FloatTensor:$grad,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                   DefaultValuedAttr<Smp_ReductionAttr,
                       "::smp::Reduction::mean">:$reduction,
                   OptionalAttr<I64Attr>:$classes);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad (`weights` $weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Smp_CrossEntropyWithGradOp : Smp_Op<"cross_entropy_with_grad", [Pure]> {
  let summary = "cross_entropy and its cross_entropy_grad in one pass";
  let description = [{
    The loss of `smp.cross_entropy` and the logits' gradient of
    `smp.cross_entropy_grad` (same operands and attributes, `grad` the
    loss's incoming gradient) from one read of each row's statistics:
    `smp-fuse-loss-grad` makes it where a training step's loss and its
    gradient read the same logits and the incoming gradient is known before
    the loss (a language model's logits are the step's largest tensor: the
    two ops read it three times, this one twice, in one launch). The loss
    has cross_entropy's type (f32 for f16/bf16 logits), the gradient the
    logits' type; the gradient may take the logits' storage.
  }];
  let arguments = (ins Smp_FloatTensor:$logits, Smp_IntTensor:$labels,
                   Optional<Smp_FloatTensor>:$weights, Smp_FloatTensor:$grad,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
                   DefaultValuedAttr<Smp_ReductionAttr,
                       "::smp::Reduction::mean">:$reduction,
                   OptionalAttr<I64Attr>:$classes);
  let results = (outs Smp_FloatTensor:$loss, Smp_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad (`weights` $weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Smp_CrossEntropyShardOp : Smp_Op<"cross_entropy_shard", [Pure,
    InferTypeOpAdaptor]> {
  let summary = "A vocabulary shard's log-sum-exp and target logit per row";
  let description = [{
    The per-row statistics of a softmax cross-entropy whose classes are
    split over ranks (tensor parallelism's vocabulary-parallel loss,
    Megatron's parallel cross-entropy): `logits` [..., W] are classes
    `offset` .. `offset` + W - 1 of `classes` (a 0-d i64 `offset`, this
    rank's first class; columns past `classes` are padding no statistic
    reads). The result [..., 2] holds each row's log(sum(exp)) over its
    valid columns (-inf when it has none) and the logit of the row's label
    when the label is in the shard, else 0; f32 (f64 for f64 logits). A
    label that is not `ignore_index` must lie in [0, classes). The ranks'
    statistics combine into the loss with a max, a sum of exponentials and
    a sum (smp-build-train-step), so no rank holds more than its shard.
  }];
  let arguments = (ins Smp_FloatTensor:$logits, Smp_IntTensor:$labels,
                   Smp_IntTensor:$offset, I64Attr:$classes,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $offset attr-dict `:` functional-type(operands, results)
  }];
}

def Smp_LabelRankOp : Smp_Op<"label_rank", [Pure, InferTypeOpAdaptor]> {
  let summary = "Per row, the classes whose logits come before the label's";
  let description = [{
    The rank of each row's label in its logits sorted in descending order,
    ties kept in class order (torch.argmax's first maximum): the number of
    valid columns c of `logits` [..., W] (classes `offset` + c of `classes`,
    as in cross_entropy_shard) whose logit is NaN, above the label's logit,
    or equal to it at a lower class. 0 when the label is the row's argmax,
    and for a row whose label is `ignore_index`. The label's logit is
    `target` ([...], the all-reduced target logits of a vocabulary-parallel
    cross-entropy) when given, else read from the row (the label must then
    lie in the shard); a NaN one ranks every valid column before the label.
    A vocabulary shard's ranks add up to the whole row's. The result is f32
    with the labels' shape. An evaluation's accuracy counts the labels of
    rank 0 (smp-build-gradients --eval-accuracy); it has no gradient.
  }];
  let arguments = (ins Smp_FloatTensor:$logits, Smp_IntTensor:$labels,
                   Smp_IntTensor:$offset, Optional<Smp_FloatTensor>:$target,
                   I64Attr:$classes,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $offset (`target` $target^)? attr-dict `:`
    functional-type(operands, results)
  }];
}

def Smp_CrossEntropyShardGradOp : Smp_Op<"cross_entropy_shard_grad", [Pure,
    InferTypeOpAdaptor]> {
  let summary = "Gradient of cross_entropy_shard with respect to the logits";
  let description = [{
    grad[..., 0] * exp(logits - stats[..., 0]) plus grad[..., 1] at the
    label's column when the label is in the shard; zero in the padding
    columns. `stats` is the forward's result, `grad` its gradient; the
    result has the logits' type.
  }];
  let arguments = (ins Smp_FloatTensor:$logits, Smp_IntTensor:$labels,
                   Smp_IntTensor:$offset, Smp_FloatTensor:$stats,
                   Smp_FloatTensor:$grad, I64Attr:$classes,
                   DefaultValuedAttr<I64Attr, "-100">:$ignore_index);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $offset `,` $stats `,` $grad attr-dict `:`
    functional-type(operands, results)
  }];
}

def Smp_GatherGradOp : Smp_Op<"gather_grad", [Pure]> {
  let summary = "Scatter-add of gather's gradient into a zero tensor";
  let description = [{
    The gradient of `smp.gather` with respect to its data: a tensor of the
    result type (the data's type) where each gathered slice's gradient is
    added at its index (repeated indices accumulate).
  }];
  let arguments = (ins Smp_IntTensor:$indices, Smp_FloatTensor:$grad,
                   I64Attr:$axis);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Smp_GatherNdGradOp : Smp_Op<"gather_nd_grad", [Pure]> {
  let summary = "Scatter-add of gather_nd's gradient into a zero tensor";
  let description = [{
    The gradient of `smp.gather_nd` with respect to its data (the result
    type): each gathered slice's gradient is added at its index tuple
    (repeated tuples accumulate).
  }];
  let arguments = (ins Smp_IntTensor:$indices, Smp_FloatTensor:$grad,
                   DefaultValuedAttr<I64Attr, "0">:$batch_dims);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Smp_GatherElementsGradOp : Smp_Op<"gather_elements_grad", [Pure]> {
  let summary = "Scatter-add of gather_elements' gradient into a zero tensor";
  let description = [{
    The gradient of `smp.gather_elements` with respect to its data (the
    result type): each element's gradient is added where it was read
    (repeated indices accumulate), PyTorch's scatter_add.
  }];
  let arguments = (ins Smp_IntTensor:$indices, Smp_FloatTensor:$grad,
                   I64Attr:$axis);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Smp_SliceGradOp : Smp_Op<"slice_grad", [Pure]> {
  let summary = "Places a slice's gradient into zeros of the input's shape";
  let arguments = (ins Smp_Tensor:$grad, DenseI64ArrayAttr:$starts,
                   DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$steps);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
  let hasVerifier = 1;
}

def Smp_ConvGradOp : Smp_Op<"conv_grad", [Pure,
    AllTypesMatch<["input", "input_grad"]>,
    AllTypesMatch<["weight", "weight_grad"]>]> {
  let summary = "Gradients of conv with respect to its input and weight";
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$weight,
                   Smp_FloatTensor:$grad,
                   DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                   DenseI64ArrayAttr:$dilations, I64Attr:$group);
  let results = (outs Smp_FloatTensor:$input_grad,
                      Smp_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad attr-dict `:` type($input) `,` type($weight)
    `,` type($grad)
  }];
}

def Smp_PoolGradOp : Smp_Op<"pool_grad", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Gradient of max_pool (mode max) or avg_pool (mode avg)";
  let description = [{
    Max: each window's gradient goes to its maximum (the first one on ties,
    as PyTorch). Avg: each window's gradient is spread over the taps its
    average divided by.
  }];
  let arguments = (ins Smp_FloatTensor:$input, Smp_FloatTensor:$grad,
                   StrAttr:$mode,
                   DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
                   DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                   DefaultValuedAttr<BoolAttr, "false">:$ceil_mode,
                   DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad attr-dict `:` type($input) `,` type($grad)
  }];
}

//===----------------------------------------------------------------------===//
// Optimizer updates (PyTorch semantics)
//===----------------------------------------------------------------------===//

def Smp_SgdUpdateOp : Smp_Op<"sgd_update", [Pure,
    AllTypesMatch<["param", "momentum_buffer", "new_param",
                   "new_momentum_buffer"]>, AllTypesMatch<["lr", "step"]>]> {
  let summary = "torch.optim.SGD step for one parameter";
  let description = [{
    g = grad + weight_decay * param; with momentum: buf = momentum * buf +
    (1 - dampening) * g (buf = g on the first step, `step` == 1), g = buf (or
    g + momentum * buf with nesterov); param -= lr * g. `lr` and `step` are
    rank-0 f32 tensors fed each step. `grad` may be f16/bf16 for an f32
    parameter, as adam_update's.
  }];
  let arguments = (ins Smp_FloatTensor:$param, Smp_FloatTensor:$grad,
                   Smp_FloatTensor:$momentum_buffer, Smp_FloatTensor:$lr,
                   Smp_FloatTensor:$step, Optional<Smp_BoolTensor>:$skip,
                   DefaultValuedAttr<F32Attr, "0.0f">:$momentum,
                   DefaultValuedAttr<F32Attr, "0.0f">:$dampening,
                   DefaultValuedAttr<F32Attr, "0.0f">:$weight_decay,
                   DefaultValuedAttr<BoolAttr, "false">:$nesterov);
  let results = (outs Smp_FloatTensor:$new_param,
                      Smp_FloatTensor:$new_momentum_buffer);
  let assemblyFormat = [{
    $param `,` $grad `,` $momentum_buffer `,` $lr `,` $step
    (`skip` $skip^ `(` type($skip) `)`)? attr-dict `:` type($param) `,` type($lr)
    custom<GradType>(type($grad), ref(type($param)))
  }];
  let hasVerifier = 1;
}

def Smp_AdamUpdateOp : Smp_Op<"adam_update", [Pure,
    AllTypesMatch<["param", "exp_avg", "exp_avg_sq", "new_param",
                   "new_exp_avg", "new_exp_avg_sq"]>,
    AllTypesMatch<["lr", "step"]>]> {
  let summary = "torch.optim.Adam / AdamW step for one parameter";
  let description = [{
    Adam (decoupled = false): g = grad + weight_decay * param. AdamW
    (decoupled = true): param *= 1 - lr * weight_decay. Then m = b1 m +
    (1 - b1) g, v = b2 v + (1 - b2) g^2, param -= lr * (m / (1 - b1^step)) /
    (sqrt(v / (1 - b2^step)) + eps).

    `grad` has the parameter's type, or, for an f32 parameter, its shape in
    f16 or bf16 (read widened to f32: the bits of the update of its f32
    copy; `smp-fuse-grad-casts` makes it so under mixed precision), which
    the syntax then names after the types: `grad tensor<...xbf16>`.
  }];
  let arguments = (ins Smp_FloatTensor:$param, Smp_FloatTensor:$grad,
                   Smp_FloatTensor:$exp_avg, Smp_FloatTensor:$exp_avg_sq,
                   Smp_FloatTensor:$lr, Smp_FloatTensor:$step,
                   Optional<Smp_BoolTensor>:$skip,
                   DefaultValuedAttr<F32Attr, "0.9f">:$beta1,
                   DefaultValuedAttr<F32Attr, "0.999f">:$beta2,
                   DefaultValuedAttr<F32Attr, "1.0e-8f">:$epsilon,
                   DefaultValuedAttr<F32Attr, "0.0f">:$weight_decay,
                   DefaultValuedAttr<BoolAttr, "true">:$decoupled);
  let results = (outs Smp_FloatTensor:$new_param, Smp_FloatTensor:$new_exp_avg,
                      Smp_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $lr `,` $step
    (`skip` $skip^ `(` type($skip) `)`)? attr-dict `:` type($param) `,` type($lr)
    custom<GradType>(type($grad), ref(type($param)))
  }];
  let hasVerifier = 1;
}


def Smp_AdamUpdateMultiOp : Smp_Op<"adam_update_multi", [Pure,
    AttrSizedOperandSegments, AttrSizedResultSegments,
    AllTypesMatch<["lr", "step"]>]> {
  let summary = "adam_update of many parameters at once (one kernel launch)";
  let description = [{
    `smp.adam_update` of each parameter i: params[i], grads[i], exp_avgs[i]
    and exp_avg_sqs[i] give new_params[i], new_exp_avgs[i] and
    new_exp_avg_sqs[i], with one lr, step, skip and one set of
    hyper-parameters for all (PyTorch's fused/foreach AdamW). The bits of
    the separate updates; on a GPU one launch instead of one a parameter.
    Formed by `smp-multi-tensor` after the step is built and split.
  }];
  let arguments = (ins Variadic<Smp_FloatTensor>:$params,
                   Variadic<Smp_FloatTensor>:$grads,
                   Variadic<Smp_FloatTensor>:$exp_avgs,
                   Variadic<Smp_FloatTensor>:$exp_avg_sqs,
                   Smp_FloatTensor:$lr, Smp_FloatTensor:$step,
                   Optional<Smp_BoolTensor>:$skip,
                   DefaultValuedAttr<F32Attr, "0.9f">:$beta1,
                   DefaultValuedAttr<F32Attr, "0.999f">:$beta2,
                   DefaultValuedAttr<F32Attr, "1.0e-8f">:$epsilon,
                   DefaultValuedAttr<F32Attr, "0.0f">:$weight_decay,
                   DefaultValuedAttr<BoolAttr, "true">:$decoupled);
  let results = (outs Variadic<Smp_FloatTensor>:$new_params,
                      Variadic<Smp_FloatTensor>:$new_exp_avgs,
                      Variadic<Smp_FloatTensor>:$new_exp_avg_sqs);
  let assemblyFormat = [{
    `params` `(` $params `)` `grads` `(` $grads `)`
    `exp_avgs` `(` $exp_avgs `)` `exp_avg_sqs` `(` $exp_avg_sqs `)`
    `lr` $lr `step` $step (`skip` $skip^ `(` type($skip) `)`)? attr-dict
    `:` `(` type($params) `)` `(` type($grads) `)` `(` type($exp_avgs) `)`
    `(` type($exp_avg_sqs) `)` type($lr) `->` `(` type($new_params) `)`
    `(` type($new_exp_avgs) `)` `(` type($new_exp_avg_sqs) `)`
  }];
  let hasVerifier = 1;
}

def Smp_SgdUpdateMultiOp : Smp_Op<"sgd_update_multi", [Pure,
    AttrSizedOperandSegments, AttrSizedResultSegments,
    AllTypesMatch<["lr", "step"]>]> {
  let summary = "sgd_update of many parameters at once (one kernel launch)";
  let description = [{
    `smp.sgd_update` of each parameter i: params[i], grads[i] and
    momentum_buffers[i] give new_params[i] and new_momentum_buffers[i],
    with one lr, step, skip and one set of hyper-parameters for all
    (PyTorch's foreach SGD). The bits of the separate updates; on a GPU one
    launch instead of one a parameter. Formed by `smp-multi-tensor` after
    the step is built and split.
  }];
  let arguments = (ins Variadic<Smp_FloatTensor>:$params,
                   Variadic<Smp_FloatTensor>:$grads,
                   Variadic<Smp_FloatTensor>:$momentum_buffers,
                   Smp_FloatTensor:$lr, Smp_FloatTensor:$step,
                   Optional<Smp_BoolTensor>:$skip,
                   DefaultValuedAttr<F32Attr, "0.0f">:$momentum,
                   DefaultValuedAttr<F32Attr, "0.0f">:$dampening,
                   DefaultValuedAttr<F32Attr, "0.0f">:$weight_decay,
                   DefaultValuedAttr<BoolAttr, "false">:$nesterov);
  let results = (outs Variadic<Smp_FloatTensor>:$new_params,
                      Variadic<Smp_FloatTensor>:$new_momentum_buffers);
  let assemblyFormat = [{
    `params` `(` $params `)` `grads` `(` $grads `)`
    `momentum_buffers` `(` $momentum_buffers `)`
    `lr` $lr `step` $step (`skip` $skip^ `(` type($skip) `)`)? attr-dict
    `:` `(` type($params) `)` `(` type($grads) `)`
    `(` type($momentum_buffers) `)` type($lr) `->` `(` type($new_params) `)`
    `(` type($new_momentum_buffers) `)`
  }];
  let hasVerifier = 1;
}

#endif // SMP_DIALECT_SMP_IR_SMPTRAININGOPS_TD
