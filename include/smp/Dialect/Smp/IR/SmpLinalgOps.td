//===- SmpLinalgOps.td - Matrix products and their epilogues -*- tablegen -*-===//
//
// smp.matmul and the products that carry cuBLASLt epilogues (bias, GELU,
// the residual's C, the bias gradient), formed by the clean-up fusions.
// Included by SmpOps.td (it uses its tensor constraints and Smp_Op).
//
//===----------------------------------------------------------------------===//

#ifndef SMP_DIALECT_SMP_IR_SMPLINALGOPS_TD
#define SMP_DIALECT_SMP_IR_SMPLINALGOPS_TD

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Smp_MatMulOp : Smp_Op<"matmul", [Pure, InferTypeOpAdaptor]> {
  let summary = "Batched matrix product with numpy broadcasting";
  let description = [{
    `numpy.matmul(op(lhs), op(rhs))` where `op` transposes the last two
    dimensions when the matching flag is set. Rank-1 operands are promoted as
    in numpy and the promoted dimension is dropped from the result.
  }];
  let arguments = (ins Smp_Tensor:$lhs, Smp_Tensor:$rhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Smp_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  // An operand that is a transpose of its last two dims becomes the flag:
  // no transposed copy is made (for weights: a copy of every matrix).
  let hasCanonicalizer = 1;
}

def Smp_MatMulBiasOp : Smp_Op<"matmul_bias", [Pure, InferTypeOpAdaptor]> {
  let summary = "smp.matmul with a bias added to every row of the result";
  let description = [{
    `matmul(lhs, rhs) + bias`, `bias` of shape `[N]` or `[1, ..., 1, N]`
    (N the result's last dim, the product's columns) with the result's
    float element type. `smp-fuse-matmul-bias` forms it from `add(bias,
    matmul)` after the training step is built and split. Both backends add
    the bias as cuBLASLt's epilogue does: to the f32 product before its one
    rounding to an f16/bf16 result (f32/f64: the pair's bits), the CUDA
    kernel in the epilogue instead of a second pass over the result.
  }];
  let arguments = (ins Smp_FloatTensor:$lhs, Smp_FloatTensor:$rhs,
                   Smp_FloatTensor:$bias,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $bias attr-dict `:` functional-type(operands, results)
  }];
}

def Smp_MatMulAddOp : Smp_Op<"matmul_add", [Pure, InferTypeOpAdaptor]> {
  let summary = "smp.matmul with a tensor of the result's type added";
  let description = [{
    `matmul(lhs, rhs) + addend`, `addend` of exactly the result's type: a
    residual connection after a Linear without a bias (LLaMA's attention
    and MLP output projections). `smp-fuse-matmul-bias{addend}` forms it
    from `add(addend, matmul)` whose product has no other use. f16/bf16: the
    addend joins the f32 product before its one rounding, as cuBLASLt adds C
    (beta = 1); f32/f64: the product, then the add (the pair's bits on the
    CPU). On CUDA the product reads the addend as cuBLASLt's C.
  }];
  let arguments = (ins Smp_FloatTensor:$lhs, Smp_FloatTensor:$rhs,
                   Smp_FloatTensor:$addend,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $addend attr-dict `:` functional-type(operands, results)
  }];
}

def Smp_MatMulBiasAddOp : Smp_Op<"matmul_bias_add", [Pure,
    InferTypeOpAdaptor]> {
  let summary = "smp.matmul_bias with a tensor of the result's type added";
  let description = [{
    `matmul_bias(lhs, rhs, bias) + addend`, `addend` of exactly the
    result's type: a residual connection after nn.Linear (GPT-2's
    attention and MLP output projections). `smp-fuse-matmul-bias` forms it
    from `add(addend, matmul_bias)` whose product has no other use. f16/bf16:
    the bias and the addend join the f32 product before its one rounding,
    as cuBLASLt adds C (beta = 1) and the bias in its epilogue (the unfused
    pair rounds the product's sum once more before the add); f32/f64: the
    product, the bias's add, then the addend's (the three ops' bits on the
    CPU). On CUDA the product reads the addend as cuBLASLt's C instead of a
    separate add reading the product and the addend and writing their sum.
  }];
  let arguments = (ins Smp_FloatTensor:$lhs, Smp_FloatTensor:$rhs,
                   Smp_FloatTensor:$bias, Smp_FloatTensor:$addend,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Smp_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $bias `,` $addend attr-dict `:`
    functional-type(operands, results)
  }];
}

def Smp_MatMulBiasGeluOp : Smp_Op<"matmul_bias_gelu", [Pure,
    InferTypeOpAdaptor]> {
  let summary = "gelu(matmul_bias), keeping the GELU's input (f16/bf16)";
  let description = [{
    `preactivation = matmul(lhs, rhs) + bias` as `smp.matmul_bias` (the bias
    added to the f32 product before its one rounding) and `result` the
    tanh-approximation GELU of that f32 sum, rounded once: cuBLASLt's
    `CUBLASLT_EPILOGUE_GELU_AUX_BIAS`, whose GELU is the tanh form. On CUDA
    the product writes both in its epilogue instead of a separate GELU pass
    reading and writing the product again; where cuBLASLt has no algorithm
    for it, matmul_bias then the gelu kernel run (the GELU of the rounded
    pre-activation). `smp-fuse-gelu-epilogue` forms it from
    `gelu(matmul_bias) {approximate = tanh}` of f16/bf16 (nn.Linear then
    GELU: GPT-2's MLP); the backward's `smp.matmul_gelu_grad` reads
    `preactivation`.
  }];
  let arguments = (ins Smp_HalfTensor:$lhs, Smp_HalfTensor:$rhs,
                   Smp_HalfTensor:$bias,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Smp_HalfTensor:$result, Smp_HalfTensor:$preactivation);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $bias attr-dict `:` functional-type(operands, results)
  }];
}

def Smp_MatMulGeluGradOp : Smp_Op<"matmul_gelu_grad", [Pure]> {
  let summary = "bias_gelu_grad of a product, in the product (f16/bf16)";
  let description = [{
    `input_grad = matmul(lhs, rhs) * gelu'(preactivation)` (the tanh
    approximation's derivative, applied to the f32 product before its one
    rounding) and `bias_grad`, the sum of `input_grad` over every dim but
    the last: cuBLASLt's `CUBLASLT_EPILOGUE_DGELU_BGRAD`, so the product
    making the GELU's output gradient (`dy W^T` of the layer after it) is
    not written, read back by a gelu_grad kernel and read again by the bias
    sum. Where cuBLASLt has no algorithm for it, matmul then bias_gelu_grad
    run in place. `smp-fuse-gelu-epilogue` forms it from
    `bias_gelu_grad(x, matmul(a, b)) {approximate = tanh}` of f16/bf16.
    `bias_grad` is `[N]` or `[1, ..., 1, N]` (N the product's last dim) of
    the product's type; `preactivation` has the product's type.
  }];
  let arguments = (ins Smp_HalfTensor:$lhs, Smp_HalfTensor:$rhs,
                   Smp_HalfTensor:$preactivation,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
                   DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Smp_HalfTensor:$input_grad, Smp_HalfTensor:$bias_grad);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $preactivation attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Smp_MatMulBiasGradOp : Smp_Op<"matmul_bias_grad", [Pure]> {
  let summary = "A linear layer's weight gradient with its bias gradient";
  let description = [{
    `result = matmul(lhs, rhs) {transpose_lhs}` of `lhs` [M, N] (the layer's
    output gradient, tokens folded into M) and `rhs` [M, K] (its input),
    and `bias_grad` [N] or [1, ..., 1, N], the sum of `lhs` over its rows as
    reduce_sum sums it: cuBLASLt's `CUBLASLT_EPILOGUE_BGRADB` sums the
    bias gradient while the product reads `lhs`, instead of a separate sum
    reading it again. `smp-fuse-bias-grad` forms it from a weight
    gradient's product and the bias gradient's `reduce_sum` of the same
    output gradient (f16/bf16). Where cuBLASLt has no algorithm for it the
    product and the sum run apart.
  }];
  let arguments = (ins Smp_HalfTensor:$lhs, Smp_HalfTensor:$rhs);
  let results = (outs Smp_HalfTensor:$result, Smp_HalfTensor:$bias_grad);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // SMP_DIALECT_SMP_IR_SMPLINALGOPS_TD
